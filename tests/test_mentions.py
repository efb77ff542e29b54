"""Mentions: the name index finds what one automaton of every name finds, follows
entities changed with plain SQL, and keeps a small ingest into a big brain from
reading every name; older chunks are found by FTS5 lookups as by a full scan."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql import mentions
from brain_sql.connection import atomic
from brain_sql.consistency import check

from .conftest import edges

# names of every shape a name can take: punctuation at either edge, inside words or
# alone, other scripts and casefolding, disambiguators, a tag, a short one, an
# alias, names inside names, names sharing their first words
NAMES = [
    ".NET Core",
    "C++",
    "AT&T",
    "Zürich",
    "Straße",
    "R2-D2",
    "???",
    "hello_world",
    "Io",
    "Dr. Who",
    "New York",
    "New York City",
    "Mark King (musician)",
    "Battle of Hastings",
    "Battle of Britain",
    "Foo  Bar",
    "The Long Dark Tea Time of the Soul by Douglas Adams",
    "Ada Lovelace",
]
TEXTS = [
    "We moved from ASP.NET Core to .NET Core; C++ and C++11 too, via AT&T's network.",
    "ZÜRICH and STRASSE, r2-d2 said ??? twice (not who???), HELLO_WORLD, io, Dr. Who and dr who.",
    "New York City is not York. Mark King played; mark king (musician) too. The battle of hastings!",
    "foo bar; the long dark tea time of the soul by douglas adams; the Countess of Lovelace wrote #rust code.",
]


def _remember_names(conn):
    records = [{"_id": f"n{i}", "title": name, "text": f"A note about thing {i}."} for i, name in enumerate(NAMES)]
    records[-1]["aliases"] = ["Countess of Lovelace"]
    records[0]["tags"] = ["rust"]
    brain_sql.remember(conn, records)


def _mentioned(conn):
    return {(a, b) for a, t, b in edges(conn) if t == "mentions"}


@pytest.fixture
def brain(tmp_path):
    def make(name):
        conn = brain_sql.connect(tmp_path / f"{name}.db")
        brain_sql.migrate(conn)
        return conn

    return make


def test_name_index_finds_what_every_name_finds(brain, monkeypatch):
    found = {}
    for path, chars_per_name in (("index", 10**9), ("automaton", 0)):
        monkeypatch.setattr(mentions, "MENTION_INDEX_CHARS_PER_NAME", chars_per_name)
        conn = brain(path)
        _remember_names(conn)
        brain_sql.remember(conn, [{"_id": f"t{i}", "title": f"text {i}", "text": t} for i, t in enumerate(TEXTS)])
        found[path] = _mentioned(conn)
    assert found["index"] == found["automaton"]
    named = {b for _, b in found["index"]}
    assert {
        ".NET Core",
        "C++",
        "AT&T",
        "Zürich",
        "Straße",
        "R2-D2",
        "???",
        "hello_world",
        "Dr. Who",
        "New York",
        "New York City",
        "Foo Bar",  # "Foo  Bar": its whitespace one space (fields.entity_key), the text's "foo bar" names it
        "Mark King (musician)",
        "Battle of Hastings",
        "Ada Lovelace",
        "The Long Dark Tea Time of the Soul by Douglas Adams",
    } == named
    assert ("text 0", "C++") in found["index"] and ("text 3", "Ada Lovelace") in found["index"]


def test_a_small_ingest_reads_only_the_names_its_text_may_hold(conn, monkeypatch):
    brain_sql.remember(conn, [{"_id": f"e{i}", "title": f"Entity number {i}", "text": "x"} for i in range(600)])
    read, real = [], mentions.Names.refresh

    def spy(self, conn):
        real(self, conn)
        read.append(len(self.names))
        return self

    monkeypatch.setattr(mentions.Names, "refresh", spy)
    brain_sql.remember(conn, [{"_id": "new", "title": "Fresh", "text": "Entity number 12 met entity NUMBER 345."}])
    assert _mentioned(conn) == {("Fresh", "Entity number 12"), ("Fresh", "Entity number 345")}
    # the names its words find, and the new entity: not the 600 others
    assert read and max(read) <= 3, read


def test_name_index_follows_entities_changed_with_plain_sql(conn, monkeypatch):
    monkeypatch.setattr(mentions, "MENTION_INDEX_CHARS_PER_NAME", 10**9)
    brain_sql.remember(
        conn,
        [
            {"_id": "r", "title": "Acme Rocket", "text": "A rocket."},
            {"_id": "g", "title": "Gone Thing", "text": "Soon gone."},
        ],
    )
    conn.execute("update entities set name = 'Zenith Rocket' where name = 'Acme Rocket'")
    conn.execute("update entities set entity_type = 'tag' where name = 'Gone Thing'")
    brain_sql.remember(conn, [{"_id": "a", "title": "One", "text": "Acme Rocket, Zenith Rocket, Gone Thing."}])
    assert _mentioned(conn) == {("One", "Zenith Rocket")}
    # the change log pruned past where the index looked: it is built again
    conn.execute("update entities set name = 'Nadir Rocket' where name = 'Zenith Rocket'")
    conn.execute("update entities set entity_type = 'document' where name = 'Gone Thing'")
    conn.execute("delete from brain_changes")
    brain_sql.remember(conn, [{"_id": "b", "title": "Two", "text": "Zenith Rocket, Nadir Rocket, Gone Thing."}])
    assert _mentioned(conn) == {("One", "Nadir Rocket"), ("Two", "Nadir Rocket"), ("Two", "Gone Thing")}
    # an index made with other keys (by an older version) is made again
    conn.execute("update brain_mention_names set hash = hash + 1")
    conn.execute("update brain_mention_names_seen set keys = keys - 1")
    brain_sql.remember(conn, [{"_id": "c", "title": "Three", "text": "Nadir Rocket again."}])
    assert ("Three", "Nadir Rocket") in _mentioned(conn)


@pytest.mark.parametrize("mode", ["scan", "rare words", "phrases", "scan for the names of common words"])
def test_older_chunks_naming_new_entities(conn, monkeypatch, mode):
    monkeypatch.setattr(mentions, "MENTION_SCAN_CHUNKS_PER_ENTITY", 10**9 if mode == "scan" else 0)
    monkeypatch.setattr(mentions, "MENTION_FTS_RARE", 1000 if mode == "rare words" else 1)
    monkeypatch.setattr(mentions, "MENTION_SCAN_CHUNKS_PER_PHRASE", 10**9 if mode.startswith("scan for") else 0)
    common = [{"_id": f"c{i}", "title": f"c{i}", "text": "the harbor lights of the old town."} for i in range(30)]
    brain_sql.remember(
        conn,
        common
        + [
            {"_id": "a", "title": "Log", "text": "The Quartz Harbor Lights shone; quartz harbor-lights did not."},
            {"_id": "b", "title": "Note", "text": "Old Town, the old town and OLD TOWN."},
        ],
    )
    brain_sql.remember(
        conn,
        [
            {"_id": "q", "title": "Quartz Harbor Lights", "text": "A lighthouse."},
            {"_id": "o", "title": "Old Town", "text": "A quarter."},
        ],
    )
    expected = {("Log", "Quartz Harbor Lights"), ("Note", "Old Town")} | {(f"c{i}", "Old Town") for i in range(30)}
    assert _mentioned(conn) == expected


_CHARS = "abAB ß.-_'é()#1\u01c5\u0301"


@given(
    names=st.lists(st.text(alphabet=_CHARS, min_size=3, max_size=12), min_size=1, max_size=8),
    picks=st.lists(st.tuples(st.integers(0, 7), st.text(alphabet=_CHARS, max_size=4)), max_size=12),
)
@settings(max_examples=80, deadline=None)
def test_the_name_index_proposes_every_name_an_automaton_of_all_finds(names, picks):
    """Whatever the names and the text around them, every entity the automaton of
    all names finds in a text is among those the index proposes for it."""
    text = "".join(names[i % len(names)] + around for i, around in picks)
    conn = brain_sql.connect(":memory:")
    brain_sql.migrate(conn)
    conn.executemany("insert or ignore into entities (name, entity_type) values (?, 'document')", [(n,) for n in names])
    mentions.follow_names(conn)
    every_name = mentions.Names(conn)
    texts = [text, text.upper()]
    found = {entity_id for each in texts for entity_id in every_name.found(each)}
    assert found <= mentions._named_entities(conn, texts)


def _index_rows(conn):
    return set(conn.execute("select head, words, hash, entity_id from brain_mention_names"))


def test_the_name_index_is_made_again_a_part_at_a_time(conn, monkeypatch):
    """Made again (the change log no longer reaches back), the index is built a few
    entity ids a call, each call in a transaction of its own: not used until it is
    whole, mentions meanwhile matched against every name; whole, it is as if made
    at once."""
    brain_sql.remember(conn, [{"_id": f"e{i}", "title": f"Gadget {i}", "text": "x"} for i in range(30)])
    conn.execute("update entities set name = 'Gizmo 7' where name = 'Gadget 7'")
    conn.execute("delete from brain_changes")  # the rename with it
    monkeypatch.setattr(mentions, "_FOLLOW_AT_ONCE", 5)
    monkeypatch.setattr(mentions, "MENTION_INDEX_REMEMBER_SECONDS", 0)
    brain_sql.remember(conn, [{"_id": "a", "title": "Alpha", "text": "Gadget 25, gadget 3 and Gizmo 7."}])  # a part
    assert mentions._index_position(conn) is None  # still being made
    assert _mentioned(conn) == {("Alpha", "Gadget 25"), ("Alpha", "Gadget 3"), ("Alpha", "Gizmo 7")}
    parts = 1
    while True:
        with atomic(conn):
            left = mentions.follow_names(conn, deadline=0)
        parts += 1
        if not left:
            break
    assert parts >= 6 and mentions._index_position(conn) is not None
    assert _index_rows(conn) == {
        (*key, i) for i, name in conn.execute("select id, name from entities") for key in mentions.name_keys(name)
    }


def test_an_index_behind_the_change_log_is_used_with_the_entities_changed_since(conn, monkeypatch):
    """A remember follows the index for a while only: entities the index has not
    reached yet are matched still (those the log names since it looked)."""
    brain_sql.remember(conn, [{"_id": "first", "title": "First", "text": "y"}])  # the index made, whole
    monkeypatch.setattr(mentions, "_FOLLOW_AT_ONCE", 2)
    monkeypatch.setattr(mentions, "MENTION_INDEX_REMEMBER_SECONDS", 0)
    for start in range(0, 50, 5):
        widgets = [{"_id": f"e{i}", "title": f"Widget {i}", "text": "y"} for i in range(start, start + 5)]
        brain_sql.remember(conn, widgets)
    position = mentions._index_position(conn)
    assert position is not None and position[0] < conn.execute("select max(seq) from brain_changes").fetchone()[0]
    brain_sql.remember(conn, [{"_id": "n", "title": "Notes", "text": "Widget 48, widget 2 and Widget 31."}])
    assert _mentioned(conn) == {("Notes", "Widget 48"), ("Notes", "Widget 2"), ("Notes", "Widget 31")}


@pytest.mark.parametrize("mode", ["scan", "rare words", "phrases", "scan for the names of common words"])
def test_older_chunks_looked_at_a_part_a_transaction_find_the_same(conn, monkeypatch, mode):
    """Ingest looks for new entities in older chunks in steps, one transaction each:
    the search goes on where it stopped, and finds what it finds at once."""
    monkeypatch.setattr(mentions, "MENTION_SCAN_CHUNKS_PER_ENTITY", 10**9 if mode == "scan" else 0)
    monkeypatch.setattr(mentions, "MENTION_FTS_RARE", 1000 if mode == "rare words" else 1)
    monkeypatch.setattr(mentions, "MENTION_SCAN_CHUNKS_PER_PHRASE", 10**9 if mode.startswith("scan for") else 0)
    monkeypatch.setattr(mentions, "_SCAN_AT_ONCE", 7)
    brain_sql.remember(
        conn,
        [{"_id": f"c{i}", "title": f"c{i}", "text": f"the old town, day {i}."} for i in range(40)]
        + [{"_id": "a", "title": "Log", "text": "The Quartz Harbor Lights shone."}],
    )
    with atomic(conn):  # entities whose matching is left to do, as an ingest leaves it
        mentions.queue(
            conn,
            "entity",
            [
                conn.execute("insert into entities (name, entity_type) values (?, 'document')", [name]).lastrowid
                for name in ("Quartz Harbor Lights", "Old Town", "Nowhere Place")
            ],
        )
    resolution, steps = mentions.Resolution(conn).prepare(), 0
    while True:
        with atomic(conn):
            left = resolution.step(deadline=0)
        steps += 1
        if not left:
            break
    assert steps > 2
    assert _mentioned(conn) == {("Log", "Quartz Harbor Lights")} | {(f"c{i}", "Old Town") for i in range(40)}
    assert not conn.execute("select * from brain_mention_queue").fetchall()


def test_each_step_reads_only_what_it_matches_and_what_changed_since(db_path, monkeypatch):
    """Ingest matches in many short transactions: each reads its own part of the
    queued chunks and the names of the entities the change log names since the one
    before, not every queued chunk and every name again (which took a million-name
    brain a second a step, so that each matched one chunk), and still finds an
    entity made between two of them."""
    monkeypatch.setattr(mentions, "MENTION_INDEX_CHARS_PER_NAME", 0)  # every name, as many chunks take
    monkeypatch.setattr(mentions, "_CHUNKS_AT_ONCE", 4)
    conn, other = brain_sql.connect(db_path), brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": f"t{i}", "title": f"Thing {i}", "text": "z"} for i in range(300)])
    _, notes = brain_sql.remember(
        conn, [{"_id": f"n{i}", "title": f"Note {i}", "text": f"Thing {i} and Late Thing."} for i in range(20)]
    )
    with atomic(conn):  # their matching still to do, as an interrupted ingest leaves it
        conn.execute("delete from relationships where relation_type = 'mentions'")
        mentions.queue(conn, "chunk", [i for ids in notes for i in ids])
    resolution, names_read, chunks_read = mentions.Resolution(conn).prepare(), [], []
    real_read, real_queued = mentions.Names._read, mentions.Resolution._queued

    def read(self, conn, ids):
        if self is resolution.names:  # not the other remember's
            names_read.append("all" if ids is None else len(ids))
        return real_read(self, conn, ids)

    def queued(self, kind, ids):
        if self is resolution:
            chunks_read.append(len(ids))
        return real_queued(self, kind, ids)

    monkeypatch.setattr(mentions.Names, "_read", read)
    monkeypatch.setattr(mentions.Resolution, "_queued", queued)
    steps = 0
    while True:
        if steps == 5:
            brain_sql.remember(other, [{"_id": "late", "title": "Late Thing", "text": "Made meanwhile."}])
        with atomic(conn):
            left = resolution.step(deadline=0)  # a chunk a step
        steps += 1
        if not left:
            break
    assert steps >= 20 and "all" not in names_read and sum(names_read) <= 3, names_read
    assert max(chunks_read) <= 4, chunks_read
    assert _mentioned(conn) == {(f"Note {i}", f"Thing {i}") for i in range(20)} | {
        (f"Note {i}", "Late Thing") for i in range(20)
    }


@pytest.mark.parametrize("chars_per_name", [10**9, 0], ids=["names the index finds", "every name"])
def test_a_brain_restored_during_matching_is_matched_with_its_own_names(db_path, tmp_path, monkeypatch, chars_per_name):
    """Restored from a backup while an ingest matches (sqlite3's .restore, under its
    open connection) and written again past where the matching read its names: the
    names are read again as the restored brain has them, not followed from a
    position its log now holds other changes at (each change has its stamp)."""
    monkeypatch.setattr(mentions, "MENTION_INDEX_CHARS_PER_NAME", chars_per_name)
    conn = brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": "a", "title": "Alpha Corp", "text": "A firm."}])
    _, notes = brain_sql.remember(
        conn, [{"_id": f"n{i}", "title": f"Note {i}", "text": "Beta Corp."} for i in range(3)]
    )
    with atomic(conn):  # their matching still to do, as an interrupted ingest leaves it
        conn.execute("delete from relationships where relation_type = 'mentions'")
        mentions.queue(conn, "chunk", [i for ids in notes for i in ids])
    backup = brain_sql.connect(tmp_path / "backup.db")
    conn.backup(backup)
    with atomic(conn):  # then Alpha Corp renamed, and more written
        conn.execute("update entities set name = 'Beta Corp' where name = 'Alpha Corp'")
    brain_sql.remember(conn, [{"_id": f"f{i}", "title": f"Filler {i}", "text": "x"} for i in range(10)])
    resolution = mentions.Resolution(conn).prepare()  # Beta Corp is entity a here
    backup.backup(conn)  # restored: a is Alpha Corp again
    brain_sql.remember(conn, [{"_id": "b", "title": "Beta Corp", "text": "Another firm."}])  # an entity of its own
    brain_sql.remember(conn, [{"_id": f"g{i}", "title": f"Other {i}", "text": "x"} for i in range(20)])
    while True:
        with atomic(conn):
            if not resolution.step():
                break
    named = {(a, b) for a, b in _mentioned(conn) if a.startswith("Note")}
    assert named == {(f"Note {i}", "Beta Corp") for i in range(3)}
    assert conn.execute("select name from entities where id = (select min(id) from entities)").fetchone() == (
        "Alpha Corp",
    )


def test_a_change_log_begun_again_makes_the_name_index_again(conn, monkeypatch):
    """The change log cleared with its counter (by hand, or by a tool) and written
    past where the name index looked: the change at that position is another
    one (its stamp tells), so the index is made again, not followed from there."""
    monkeypatch.setattr(mentions, "MENTION_INDEX_CHARS_PER_NAME", 10**9)
    brain_sql.remember(conn, [{"_id": "r", "title": "Acme Rocket", "text": "A rocket."}])
    with atomic(conn):
        conn.execute("delete from brain_changes")
        conn.execute("delete from sqlite_sequence where name = 'brain_changes'")
        conn.execute("update entities set name = 'Zenith Rocket' where name = 'Acme Rocket'")  # change 1
    brain_sql.remember(conn, [{"_id": f"f{i}", "title": f"Filler {i}", "text": "x"} for i in range(20)])
    brain_sql.remember(conn, [{"_id": "a", "title": "One", "text": "Zenith Rocket lifts off."}])
    assert _mentioned(conn) == {("One", "Zenith Rocket")}


@pytest.mark.parametrize("lookup_chunks", [0, 200])  # every name in one automaton, or looked up run by run
def test_mentions_found_alike_by_automaton_and_lookup(tmp_path, monkeypatch, lookup_chunks):
    monkeypatch.setattr(mentions, "MENTION_LOOKUP_CHUNKS", lookup_chunks)
    conn = brain_sql.connect(tmp_path / "brain.db")
    names = ["C++", ".NET Core", "Straße", "Mark King (musician)", "New York", "New York City", "data_set"]
    brain_sql.remember(conn, [{"_id": f"n{i}", "title": name, "text": f"About {i}."} for i, name in enumerate(names)])
    brain_sql.remember(
        conn,
        [
            {
                "_id": "yes",
                "title": "Port notes",
                "text": "We ported the c++ parser to .NET CORE in the STRASSE office "
                "with Mark King, in New York City; data_set.",
            },
            {"_id": "no", "title": "Near misses", "text": "Not xC++, data_set2, NewYork, Mark Kingdom or mark-kingly."},
        ],
    )
    mentioned = {(a, b) for a, relation, b in edges(conn) if relation == "mentions"}
    assert mentioned == {("Port notes", name) for name in names} | {("New York City", "New York")}  # its title
    assert check(conn) == {}


def test_mentions_matched_later_follow_the_entities_as_they_are_then(tmp_path):
    """Ingest matches queued mentions in transactions of their own, with names read
    before them: an entity forgotten meanwhile is not mentioned, one made meanwhile is."""
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": "quokka", "title": "Quokka Crew", "text": "A team."}])
    _, [notes] = brain_sql.remember(
        conn, [{"_id": "notes", "title": "Notes", "text": "The Quokka Crew met the Okapi Office."}]
    )
    with atomic(conn):  # its matching still to do, as an interrupted ingest leaves it
        conn.execute("delete from relationships where relation_type = 'mentions'")
        mentions.queue(conn, "chunk", notes)
    resolution = mentions.Resolution(conn).prepare()
    other = brain_sql.connect(db_path)
    assert brain_sql.forget(other, external_ids=["quokka"])["removed"]["entities"] == 1
    brain_sql.remember(other, [{"_id": "okapi", "title": "Okapi Office", "text": "Another team."}])
    with atomic(conn):
        assert not resolution.step()
    assert {(a, b) for a, relation, b in edges(conn) if relation == "mentions"} == {("Notes", "Okapi Office")}
    assert check(conn) == {}


def test_the_name_index_keys_held_in_memory_find_what_its_sql_finds_as_names_change(tmp_path):
    """_KnownKeys (the name index's keys in memory, which spare SQL lookups of runs
    no name has) proposes exactly what the index's SQL does, and follows writes:
    names added, renamed and deleted by another connection, and a change log that
    no longer reaches back (read again whole)."""
    path = str(tmp_path / "keys.db")
    conn, other = brain_sql.connect(path), brain_sql.connect(path)
    brain_sql.migrate(conn)

    def names(*rows):
        with other:
            other.executemany("insert or ignore into entities (name, entity_type) values (?, 'document')", rows)

    texts = ["Quartz Harbor met the Old Town team and Gizmo Seven", "then Old Town Hall, Neon Fjord and x"]

    def both():
        with conn:
            mentions.follow_names(conn)
        since = mentions._index_position(conn)
        by_sql, by_keys = mentions._named_entities(conn, texts), mentions._named_entities(conn, texts, since)
        assert by_keys == by_sql
        return by_sql

    names(("Quartz Harbor",), ("Old Town",), ("Gadget 7",))
    assert len(both()) == 2 and mentions._known_keys.held(conn)
    names(("Old Town Hall",), ("Neon Fjord",))
    with other:
        other.execute("update entities set name = 'Gizmo Seven' where name = 'Gadget 7'")
        other.execute("delete from entities where name = 'Quartz Harbor'")
    found = both()
    assert {
        name for (name,) in conn.execute("select name from entities where id in (%s)" % ",".join(map(str, found)))
    } == {
        "Old Town",
        "Old Town Hall",
        "Neon Fjord",
        "Gizmo Seven",
    }
    with other:
        other.execute("delete from brain_changes")  # the log no longer tells: the keys are read again whole
    names(("Harbor Lights",))
    texts.append("the Harbor Lights")
    assert len(both()) == 5


def test_a_chunk_is_tied_to_the_entities_it_names_first_up_to_the_limit(tmp_path, monkeypatch):
    """Review 99: overlapping names made to order tied one 2 KB chunk to 64,894 entities
    (650,000 edges from a 19 KB record). A chunk's text is tied to MAX_CHUNK_MENTIONS of
    them at most: those it names first, the longer name first where two start together."""
    monkeypatch.setattr(mentions, "MAX_CHUNK_MENTIONS", 4)
    conn = brain_sql.connect(tmp_path / "brain.db")
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    named = [" ".join(words[i : i + 2]) for i in range(5)] + ["alpha"]  # "alpha bravo", ..., "echo foxtrot"
    brain_sql.remember(conn, [{"_id": f"e{i}", "title": name, "text": f"entity {i}"} for i, name in enumerate(named)])
    brain_sql.remember(conn, [{"_id": "t", "title": "t", "text": " ".join(words)}])
    found = {b for a, t, b in edges(conn) if t == "mentions" and a == "t"}
    assert found == {"alpha bravo", "alpha", "bravo charlie", "charlie delta"}  # not "delta echo", "echo foxtrot"
    # review 100: a chunk written first is matched again as entities arrive, batch by batch
    later = brain_sql.connect(tmp_path / "later.db")
    brain_sql.remember(later, [{"_id": "t", "title": "t", "text": " ".join(words)}])
    for batch in (named[:3], named[3:]):
        brain_sql.remember(later, [{"_id": f"e-{name}", "title": name, "text": "entity"} for name in batch])
    assert len({b for a, t, b in edges(later) if t == "mentions" and a == "t"}) == 4
    monkeypatch.setattr(mentions, "MAX_CHUNK_MENTIONS", 1_000)
    brain_sql.remember(conn, [{"_id": "u", "title": "u", "text": " ".join(words)}])
    assert len({b for a, t, b in edges(conn) if t == "mentions" and a == "u"}) == 6
