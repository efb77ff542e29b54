"""Conversation transcripts: a turn is a memory tied to its speaker and session,
searched with what a question about it needs (speaker, day, resolved relative
dates, the turns before it) and returned as the turn alone; the turns' quotes of
each other that plain SQL made stale are found by check and restated by repair."""

import json

import pytest

import brain_sql
from brain_sql import pipeline
from brain_sql.pipeline import remember

from .conftest import edges, rows, without_rules, write

TURNS = [
    {"_id": "S1:1", "text": "Hey Mel! How was your weekend?", "speaker": "Caroline"},
    {"_id": "S1:2", "text": "Great! We hiked up to the old lighthouse with the kids.", "speaker": "Melanie"},
    {"_id": "S1:3", "text": "I went to a support group yesterday and it was so powerful.", "speaker": "Caroline"},
    {"_id": "S1:4", "text": "What did the counsellor say about it?", "speaker": "Melanie"},
    {"_id": "S1:5", "text": "That I should keep going every week.", "speaker": "Caroline"},
]


def transcript(tmp_path, turns=TURNS, session="chat/1", observed_at="2023-05-08T13:56:00"):
    lines = [json.dumps({**t, "session_id": session, "observed_at": observed_at}) for t in turns]
    return write(tmp_path / "chat.jsonl", "\n".join(lines) + "\n")


def by_external_id(conn):
    return {row[0]: row[1:] for row in rows(conn, "select external_id, title, content, context from knowledge")}


def test_a_turn_is_stored_as_said_and_searched_with_its_speaker_day_and_earlier_turns(conn, tmp_path):
    report = brain_sql.ingest(conn, [transcript(tmp_path)])
    assert not report.errors
    stored = by_external_id(conn)
    title, content, context = stored["S1:3"]
    assert content == TURNS[2]["text"]  # the turn itself, never its context
    assert title == "Caroline, 8 May 2023"  # a turn without a title is named by who said it, and when
    assert context.splitlines() == [
        "Caroline, 8 May 2023",
        "yesterday: 7 May 2023",
        "Caroline: Hey Mel! How was your weekend?",
        "Melanie: Great! We hiked up to the old lighthouse with the kids.",
    ]
    # only the last two turns before it, and none after it
    assert "Hey Mel" not in stored["S1:4"][2] and "keep going" not in stored["S1:4"][2]
    assert {
        ("Caroline, 8 May 2023", "said_by", "Caroline"),
        ("Melanie, 8 May 2023", "said_by", "Melanie"),
        ("Caroline, 8 May 2023", "in_session", "chat/1"),
    } <= edges(conn)
    types = dict(rows(conn, "select name, entity_type from entities where name in ('Caroline', 'chat/1')"))
    assert types == {"Caroline": "person", "chat/1": "session"}
    # speaker and session stay with the memory, as the record gave them
    metadata = json.loads(conn.execute("select metadata from knowledge where external_id = 'S1:3'").fetchone()[0])
    assert metadata == {"speaker": "Caroline", "session_id": "chat/1"}


def test_a_question_finds_the_turn_its_words_are_only_around(conn, tmp_path):
    """ "What did the counsellor say?" is answered by S1:5, which names no counsellor:
    the turn before it does. The hit is the turn, with its own text."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    result = brain_sql.recall(conn, {"q": "what did the counsellor advise Caroline", "k": 3, "cutoff": False})
    ids = [hit["external_id"] for hit in result["hits"]]
    assert "S1:5" in ids
    hit = next(h for h in result["hits"] if h["external_id"] == "S1:5")
    assert hit["content"] == "That I should keep going every week."


def test_a_month_without_a_year_is_the_latest_one_with_memories(conn, tmp_path):
    """Asked in 2026 about a conversation held in 2023, "in May" means May 2023."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    result = brain_sql.recall(conn, {"q": "support group in May", "now": "2026-11-29", "cutoff": False})
    assert result["query"]["since"] == "2023-05-01 00:00:00"
    assert result["query"]["until"] == "2023-06-01 00:00:00"
    assert "S1:3" in [hit["external_id"] for hit in result["hits"]]
    since = brain_sql.recall(conn, {"q": "support group since May", "now": "2026-11-29", "cutoff": False})
    assert (since["query"]["since"], since["query"]["until"]) == ("2023-05-01 00:00:00", None)
    later = [
        {
            "_id": "L1",
            "text": "Back from the coast.",
            "speaker": "Ann",
            "session_id": "chat/2",
            "observed_at": "2023-08-01",
        }
    ]
    remember(conn, later)
    before = brain_sql.recall(conn, {"q": "support group before June", "now": "2026-11-29", "cutoff": False})
    assert before["query"]["until"] == "2023-06-01 00:00:00"  # the June with memories on both sides
    # with no memory in any March of the last ten years, "in March" is searched as text
    march = brain_sql.recall(conn, {"q": "support group in March", "now": "2026-11-29"})
    assert (march["query"]["since"], march["query"]["searched"]) == (None, "support group in March")
    # and so is a window relative to now that holds none: the trip was "last year" to the speaker
    last_year = brain_sql.recall(conn, {"q": "support group last year", "now": "2026-11-29"})
    assert (last_year["query"]["since"], last_year["query"]["searched"]) == (None, "support group last year")
    # a window named with its year is applied, whatever it holds
    named = brain_sql.recall(conn, {"q": "support group in May 2022", "now": "2026-11-29"})
    assert (named["query"]["since"], named["hits"]) == ("2022-05-01 00:00:00", [])


def test_remembered_turns_take_their_context_from_the_turns_stored_before(conn):
    """An agent remembers a conversation a turn at a time."""
    for turn in TURNS[:4]:
        report, _ = remember(conn, [{**turn, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}])
        assert not report.errors
    context = by_external_id(conn)["S1:4"][2]
    assert context.splitlines()[-2:] == [
        "Melanie: Great! We hiked up to the old lighthouse with the kids.",
        "Caroline: I went to a support group yesterday and it was so powerful.",
    ]
    # remembering a turn again (same _id) never takes itself for an earlier turn
    remember(conn, [{**TURNS[3], "text": "What did the counsellor say?", "session_id": "chat/1"}])
    again = by_external_id(conn)["S1:4"][2]
    assert "counsellor" not in again and again.splitlines()[-1].startswith("Caroline: I went")


def test_a_speaker_of_most_turns_does_not_lead_the_walk(conn, tmp_path):
    """A name tied to more than COMMON_TERM_SHARE of what the caller can read is as
    common as a common word: it seeds nothing. Among many other memories, the same
    name seeds the walk again."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    query = {"q": "what did Caroline say about the lighthouse", "cutoff": False}
    assert brain_sql.recall(conn, query)["telemetry"]["entity_seeds"] == 0  # 3 of 5 turns are hers
    notes = [{"_id": f"n{i}", "title": f"Note {i}", "text": f"Inventory item {i} is on shelf {i}."} for i in range(10)]
    brain_sql.ingest(conn, [write(tmp_path / "notes.json", json.dumps(notes))])
    assert brain_sql.recall(conn, query)["telemetry"]["entity_seeds"] == 1  # 3 of 15


def test_records_without_a_session_are_not_turns(conn, tmp_path):
    path = write(tmp_path / "notes.jsonl", json.dumps({"_id": "n1", "text": "Plain note.", "speaker": "Ann"}) + "\n")
    brain_sql.ingest(conn, [path])
    assert by_external_id(conn)["n1"] == (None, "Plain note.", None)


def test_a_brain_made_before_context_was_searched_is_migrated(db_path, tmp_path):
    """knowledge_fts is made again with the context column and rebuilt from
    knowledge: every memory stays searchable, and context is searched."""
    conn = brain_sql.connect(db_path)
    brain_sql.ingest(conn, [transcript(tmp_path)])
    # back to the shape of a brain written before m009
    conn.execute("delete from _sqlite_migrations where name = 'm010_searched_context'")
    for name in ("knowledge_fts_insert", "knowledge_fts_delete", "knowledge_fts_update"):
        conn.execute(f"drop trigger {name}")
    conn.execute("drop table knowledge_fts")
    conn.execute(
        "create virtual table knowledge_fts using fts5(title, content, content_hash UNINDEXED, "
        "content='knowledge', content_rowid='id', tokenize='porter unicode61')"
    )
    conn.execute("insert into knowledge_fts(knowledge_fts) values ('rebuild')")
    conn.execute("alter table knowledge drop column context")
    conn.execute("update documents set content_hash = 'hashed without context'")
    conn.commit()
    assert brain_sql.pending_migrations(conn) == ["m010_searched_context"]
    # recall on it says what to do, never SQLite's "no such column"
    with pytest.raises(brain_sql.BrainError, match="not migrated yet.*sqlite-utils brain init"):
        brain_sql.recall(conn, {"q": "counsellor"})
    conn.close()
    brain_sql.warm(db_path)  # what a server does for each brain when it starts
    conn = brain_sql.connect(db_path)
    assert brain_sql.pending_migrations(conn) == []
    assert brain_sql.recall(conn, {"q": "what did the counsellor say", "cutoff": False})["hits"]
    # turns stored before have no context until their file is ingested again
    report = brain_sql.ingest(conn, [transcript(tmp_path)])
    assert (report.documents_updated, report.errors) == (5, [])
    columns = [row[1] for row in conn.execute("pragma table_info(knowledge_fts)")]
    assert columns == ["title", "content", "context", "content_hash"]
    found = rows(
        conn,
        "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
        "where knowledge_fts match 'counsellor' order by k.external_id",
    )
    assert found == [("S1:4",), ("S1:5",)]  # S1:5 by its context alone
    assert brain_sql.check(conn) == {}


def quotes(conn, external_id):
    return conn.execute("select context from knowledge where external_id = ?", [external_id]).fetchone()[0]


def test_a_forgotten_flagged_or_corrected_turn_is_not_found_through_the_turns_after_it(conn, tmp_path):
    """The turns after a turn quote it in their contexts: forgetting it, flagging it
    or correcting it restates those quotes (and their vectors), so its old words
    find nothing."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    assert "Caroline: I went to a support group" in quotes(conn, "S1:4")
    assert "Caroline: I went to a support group" in quotes(conn, "S1:5")
    vector = conn.execute(
        "select embedding_int8 from vec_knowledge v join knowledge k on k.id = v.knowledge_id "
        "where k.external_id = 'S1:4'"
    ).fetchone()[0]
    brain_sql.forget(conn, external_ids=["S1:3"])
    assert "support group" not in quotes(conn, "S1:4") and "support group" not in quotes(conn, "S1:5")
    assert quotes(conn, "S1:4").splitlines() == [
        "Melanie, 8 May 2023",
        "Melanie: Great! We hiked up to the old lighthouse with the kids.",
    ]
    found = rows(
        conn,
        "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
        "where knowledge_fts match 'powerful'",
    )
    assert found == []
    stored = conn.execute(
        "select v.embedding_int8, k.content_hash from vec_knowledge v join knowledge k "
        "on k.id = v.knowledge_id where k.external_id = 'S1:4'"
    ).fetchone()
    assert stored[0] != vector  # embedded again, with its context as it is now
    assert brain_sql.check(conn) == {}

    # corrected: the turns after it quote it as it is now
    remember(conn, [{**TURNS[1], "text": "Great! We sailed to the island.", "session_id": "chat/1"}])
    assert "sailed to the island" in quotes(conn, "S1:4") and "lighthouse" not in quotes(conn, "S1:4")

    # flagged: never shown, nor quoted, even when its file is ingested again
    flagged = conn.execute("select id from knowledge where external_id = 'S1:2'").fetchone()[0]
    brain_sql.flag(conn, [flagged])
    assert "island" not in quotes(conn, "S1:4")
    assert brain_sql.check(conn) == {}
    brain_sql.ingest(conn, [transcript(tmp_path)])  # S1:3 is back (forgetting is not deleting from the file)
    assert "lighthouse" not in quotes(conn, "S1:3") + quotes(conn, "S1:4")
    assert brain_sql.check(conn) == {}


def test_a_flagged_turn_stays_unquoted_when_its_file_is_ingested_again(conn, tmp_path):
    brain_sql.ingest(conn, [transcript(tmp_path)])
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = 'S1:2'").fetchone()[0]])
    ids = dict(rows(conn, "select external_id, id from knowledge"))
    report = brain_sql.ingest(conn, [transcript(tmp_path)])
    assert "lighthouse" not in quotes(conn, "S1:3") + quotes(conn, "S1:4")
    assert (
        report.chunks_added == 0 and dict(rows(conn, "select external_id, id from knowledge")) == ids
    )  # same memories


def test_a_quote_is_dropped_whole_never_a_longer_one_that_begins_alike(conn, tmp_path):
    turns = [
        {"_id": "a", "text": "Hi", "speaker": "Ann"},
        {"_id": "b", "text": "Hi there", "speaker": "Ann"},
        {"_id": "c", "text": "Hello both", "speaker": "Bo"},
    ]
    brain_sql.ingest(conn, [transcript(tmp_path, turns)])
    brain_sql.forget(conn, external_ids=["a"])
    assert quotes(conn, "c").splitlines()[1:] == ["Ann: Hi there"]


def test_a_turn_quotes_only_earlier_turns_in_its_own_scope(conn, tmp_path):
    """Whoever may read a turn may read what its context quotes: a session whose
    turns lie in two scopes keeps each scope's words to itself."""
    turns = [
        {"_id": "p1", "text": "The zebrafish budget is secret.", "speaker": "Ann", "scope": "/acme/legal"},
        {"_id": "q1", "text": "What's for lunch?", "speaker": "Bo", "scope": "/acme/support"},
        {"_id": "q2", "text": "Soup, I think.", "speaker": "Ann", "scope": "/acme/support"},
    ]
    brain_sql.ingest(conn, [transcript(tmp_path, turns)])
    assert "zebrafish" not in quotes(conn, "q1") + quotes(conn, "q2")
    assert quotes(conn, "q2").splitlines()[-1] == "Bo: What's for lunch?"
    # remembered a turn at a time, the same holds
    remember(conn, [{"_id": "q3", "text": "Ok.", "speaker": "Bo", "session_id": "chat/1", "scope": "/acme/support"}])
    assert "zebrafish" not in quotes(conn, "q3") and "Soup" in quotes(conn, "q3")
    hits = brain_sql.recall(conn, {"q": "zebrafish budget", "scope": "/acme/support", "cutoff": False})["hits"]
    assert all("zebrafish" not in (h["content"] + (h["title"] or "")) for h in hits)
    assert not rows(
        conn,
        "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
        "where knowledge_fts match 'zebrafish' and k.scope = '/acme/support'",
    )


def test_odd_turns_are_stored_and_bounded(conn, tmp_path):
    """A phrase that cannot be read as a date stays unread, never refusing the turn;
    a made-up title stays within the title cap; a quote of a long turn is cut; a
    true/false speaker names no one: that record is refused by name, the rest stored."""
    turns = [
        {"_id": "t1", "text": "tomorrow then", "speaker": "Al", "observed_at": "9999-12-31T10:00:00"},
        {"_id": "t2", "text": "That happened 999999999 days ago. " + "word " * 1000, "speaker": "S" * 600},
        {"_id": "t3", "text": "Right.", "speaker": "Al"},
        {"_id": "t4", "text": "Not a turn.", "speaker": True},
    ]
    lines = [json.dumps({**t, "session_id": "odd"}) for t in turns]
    report = brain_sql.ingest(conn, [write(tmp_path / "odd.jsonl", "\n".join(lines))])
    assert [(e.line, e.message) for e in report.errors] == [(4, "speaker must be text or a whole number, not true")]
    stored = by_external_id(conn)
    assert stored["t1"][2].splitlines()[0] == "Al, 31 December 9999"
    assert len(stored["t2"][0]) <= 500 and "days ago:" not in stored["t2"][2]
    quote = stored["t3"][2][stored["t3"][2].index("S" * 100) :]  # the quote of t2, after the one of t1
    assert quote.startswith("S" * 100 + "…: That happened") and quote.endswith("…") and len(quote) == 101 + 2 + 1001
    assert "t4" not in stored


def test_a_turn_flagged_with_plain_sql_is_found_by_check_and_repaired(conn, tmp_path):
    brain_sql.ingest(conn, [transcript(tmp_path)])
    conn.execute("update knowledge set flagged = 1 where external_id = 'S1:3'")
    quoting = [
        row[0] for row in conn.execute("select document_id from knowledge where external_id in ('S1:4', 'S1:5')")
    ]
    assert brain_sql.check(conn) == {"stale_quotes": sorted(quoting)}
    brain_sql.check(conn, repair=True)
    assert "support group" not in quotes(conn, "S1:4") + quotes(conn, "S1:5")
    assert brain_sql.check(conn) == {}


def test_the_same_words_said_twice_are_told_apart(conn, tmp_path):
    """Short turns repeat ("Thanks"): flagging one drops its quote only from the
    turns after it, never the other's quote; check stays clean and ingesting the
    file again changes nothing."""
    turns = [
        {"_id": "t1", "text": "Thanks", "speaker": "Bob"},
        {"_id": "t2", "text": "Sure.", "speaker": "Ann"},
        {"_id": "t3", "text": "Thanks", "speaker": "Bob"},
        {"_id": "t4", "text": "Bye!", "speaker": "Ann"},
        {"_id": "t5", "text": "Yes", "speaker": "Bob"},
        {"_id": "t6", "text": "Yes, absolutely wonderful", "speaker": "Bob"},
        {"_id": "t7", "text": "Good.", "speaker": "Ann"},
    ]
    path = transcript(tmp_path, turns)
    brain_sql.ingest(conn, [path])
    assert quotes(conn, "t4").splitlines()[1:] == ["Ann: Sure.", "Bob: Thanks"]
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = 't1'").fetchone()[0]])
    assert quotes(conn, "t4").splitlines()[1:] == ["Ann: Sure.", "Bob: Thanks"]  # t3's quote, kept
    assert quotes(conn, "t3").splitlines()[1:] == ["Ann: Sure."]  # t1's, dropped
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = 't5'").fetchone()[0]])
    assert quotes(conn, "t7").splitlines()[1:] == ["Bob: Yes, absolutely wonderful"]
    assert brain_sql.check(conn) == {}
    ids = dict(rows(conn, "select external_id, id from knowledge"))
    report = brain_sql.ingest(conn, [path])
    assert (report.documents_unchanged, dict(rows(conn, "select external_id, id from knowledge"))) == (7, ids)


def test_review_decisions_on_the_turns_after_a_flagged_one_outlive_ingesting_its_file_again(conn, tmp_path):
    path = transcript(tmp_path)
    brain_sql.ingest(conn, [path])
    ids = dict(rows(conn, "select external_id, id from knowledge"))
    brain_sql.flag(conn, [ids["S1:3"]])
    brain_sql.archive(conn, [ids["S1:4"]])
    brain_sql.extend_expiry(conn, [ids["S1:5"]], 30)
    decided = rows(conn, "select external_id, relevance_tier, expires_at from knowledge order by id")
    brain_sql.ingest(conn, [path])
    assert rows(conn, "select external_id, relevance_tier, expires_at from knowledge order by id") == decided
    brain_sql.forget(conn, ids=[ids["S1:2"]])
    assert "lighthouse" not in quotes(conn, "S1:4")  # forgotten: its quote goes, in place
    assert dict(rows(conn, "select external_id, id from knowledge"))["S1:4"] == ids["S1:4"]


@pytest.mark.parametrize(
    "change",
    [
        "update knowledge set scope = '/b' where external_id = 'S1:3'",  # moved to another scope
        "update knowledge set metadata = json_set(metadata, '$.session_id', 'chat/2') where external_id = 'S1:3'",
        "delete from knowledge where external_id = 'S1:3'",
    ],
)
def test_quotes_of_a_turn_moved_or_deleted_with_plain_sql_are_found_and_dropped(conn, tmp_path, change):
    """The turns after a turn quote it in their contexts; a turn moved to another
    scope or session or deleted with plain SQL is no longer what they quote
    there, and a recall in their scope would find its old words."""
    brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "scope": "/a"} for t in TURNS])])
    assert brain_sql.check(conn) == {}
    conn.execute(change)
    quoting = rows(conn, "select document_id from knowledge where external_id in ('S1:4', 'S1:5') order by 1")
    assert brain_sql.check(conn)["stale_quotes"][-2:] == [row[0] for row in quoting]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert "support group" not in quotes(conn, "S1:4") + quotes(conn, "S1:5")
    assert quotes(conn, "S1:5").splitlines()[1:] == ["Melanie: What did the counsellor say about it?"]
    assert not rows(
        conn,
        "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
        "where knowledge_fts match 'powerful' and k.external_id in ('S1:4', 'S1:5')",
    )


def test_a_turn_moved_to_another_scope_keeps_no_quote_of_its_old_one(conn, tmp_path):
    brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "scope": "/a"} for t in TURNS])])
    conn.execute("update knowledge set scope = '/b' where external_id = 'S1:5'")
    moved = conn.execute("select document_id from knowledge where external_id = 'S1:5'").fetchone()[0]
    assert brain_sql.check(conn) == {"stale_quotes": [moved]}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "S1:5") == "Caroline, 8 May 2023"  # its own lines stay
    assert not rows(
        conn,
        "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
        "where knowledge_fts match 'counsellor' and k.scope = '/b'",
    )


def test_a_turn_moved_to_another_session_is_quoted_by_the_turns_after_it_there(conn):
    """A correction moving a turn to another session makes its context from that
    session's latest turns, and the turns stored after it there quote it (review
    48: it kept its first place, before them, and the next turn quoted neither)."""

    def turn(key, session, text):
        return {"_id": key, "text": text, "speaker": "Ann", "session_id": session, "observed_at": "2023-05-08"}

    remember(conn, [turn("a1", "s1", "alpha one"), turn("a2", "s1", "alpha two")])
    remember(conn, [turn("b1", "s2", "beta one"), turn("b2", "s2", "beta two")])
    remember(conn, [turn("a1", "s2", "alpha one")])
    remember(conn, [turn("b3", "s2", "beta three")])
    context = "select context from knowledge where external_id = ?"
    assert rows(conn, context, ["a1"]) == [("Ann, 8 May 2023\nAnn: beta one\nAnn: beta two",)]
    assert rows(conn, context, ["b3"]) == [("Ann, 8 May 2023\nAnn: beta two\nAnn: alpha one",)]
    assert rows(conn, context, ["a2"]) == [("Ann, 8 May 2023",)]  # its old session quotes it no more
    remember(conn, [turn("b2", "s2", "beta two, again")])  # quoted where it is now, in both
    assert rows(conn, context, ["b3"]) == [("Ann, 8 May 2023\nAnn: beta two, again\nAnn: alpha one",)]
    assert brain_sql.check(conn) == {}


def test_contexts_as_ingest_writes_them_are_consistent(conn, tmp_path):
    """Long names and turns cut in quotes, time phrases, several lines, repeated
    words, a session over two scopes: check finds nothing to restate, until a
    turn quoting the same words twice is moved."""
    turns = [
        {"_id": "1", "text": "Yesterday was long.\nLast week too.", "speaker": "Today"},
        {"_id": "2", "text": "x " * 900, "speaker": "S" * 300},
        {"_id": "3", "text": "Thanks", "speaker": "Bo\nB"},
        {"_id": "4", "text": "Thanks", "speaker": "Bo\nB"},
        {"_id": "5", "text": "Two days ago?", "speaker": "Al", "scope": "/x"},
        {"_id": "6", "text": "Thanks", "speaker": "Bo\nB"},
        {"_id": "7", "text": "Ok.", "speaker": "Al"},
    ]
    brain_sql.ingest(conn, [transcript(tmp_path, turns)])
    assert brain_sql.check(conn) == {}
    remember(conn, [{**turns[1], "text": "Shorter now.", "session_id": "chat/1"}])  # corrected: quoted as it is now
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = '3'").fetchone()[0]])
    assert brain_sql.check(conn) == {}
    # 7 quotes both of 4 and 6's "Thanks"; 2, corrected, quotes 1 as at its place
    assert quotes(conn, "2").splitlines()[-2:] == ["Today: Yesterday was long.", "Last week too."]
    conn.execute("update knowledge set scope = '/x' where external_id = '7'")
    assert brain_sql.check(conn) == {"stale_quotes": [f"{tmp_path / 'chat.jsonl'}#7"]}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "7") == "Al, 8 May 2023"
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize(
    "turn, corrected",
    [
        (0, "Hi Mel! Long time no see, how was the weekend?"),
        (2, "I stayed home and read all day."),  # its own context said "yesterday: 7 May 2023" too
    ],
)
def test_a_turn_whose_words_plain_sql_changed_is_quoted_as_it_is_now(tmp_path, turn, corrected):
    """A turn edited in place with plain SQL: check names the turns quoting its old
    words, and its own context when its time phrases are gone; repair quotes its
    new words, as correcting the turn through remember does, instead of dropping
    the quote, and reads its own time phrases again."""
    external_id, original = TURNS[turn]["_id"], f"{TURNS[turn]['speaker']}: {TURNS[turn]['text']}"
    contexts = []
    for way in ("sql", "remember"):
        conn = brain_sql.connect(tmp_path / f"{way}.db")
        brain_sql.ingest(conn, [transcript(tmp_path, TURNS)])
        if way == "sql":
            quoting = sorted(
                d
                for d, context in rows(conn, "select document_id, context from knowledge")
                if f"\n{original}\n" in context + "\n"
            )
            conn.execute("update knowledge set content = ? where external_id = ?", [corrected, external_id])
            found = brain_sql.check(conn)
            assert quoting and found["stale_quotes"] == quoting, found
            assert "unrepaired" not in brain_sql.check(conn, repair=True)
            assert brain_sql.check(conn) == {}
        else:
            remember(
                conn, [{**TURNS[turn], "text": corrected, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}]
            )
        contexts.append([quotes(conn, t["_id"]) for t in TURNS])
    # the turns after it, as remember leaves them (which quotes the turns stored last in the corrected turn's own)
    assert contexts[0][:turn] + contexts[0][turn + 1 :] == contexts[1][:turn] + contexts[1][turn + 1 :]
    assert f"{TURNS[turn]['speaker']}: {corrected}" in contexts[0][turn + 1].splitlines()
    before = [f"{t['speaker']}: {t['text']}" for t in TURNS[:turn]]
    assert contexts[0][turn].splitlines() == ["Caroline, 8 May 2023"] + before


def test_repair_never_quotes_an_edited_turn_from_outside_a_turns_window(conn, tmp_path):
    """Plain SQL deleted S1:3 and changed S1:1's words: repair paired S1:5's quote of
    the deleted turn with S1:1, edited but never in S1:5's window, and then called
    the brain consistent (review 68). The deleted turn's quote goes; S1:2 quotes
    S1:1's new words."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    conn.execute("delete from knowledge where external_id = 'S1:3'")
    conn.execute("update knowledge set content = 'TAMPERED' where external_id = 'S1:1'")
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "S1:5").splitlines() == ["Caroline, 8 May 2023", f"Melanie: {TURNS[3]['text']}"]
    assert quotes(conn, "S1:2").splitlines() == ["Melanie, 8 May 2023", "Caroline: TAMPERED"]


@pytest.mark.parametrize("files", [1, 2])
def test_repair_never_quotes_the_turn_a_deleted_one_leaves_in_the_window(tmp_path, files):
    """Review 70: deleting T4 brings T3 into T6's window, and T3 edited took T4's
    quote (of another speaker); with two files in one session, b's turn took the
    quote of a's edited turn, though ingest quotes a file's turns alone. The
    deleted turn's quote goes."""
    said = [
        {"_id": f"T{i}", "text": f"Turn {i} says thing {i}.", "speaker": "Ann" if i % 2 else "Bob"} for i in range(1, 8)
    ]
    conn = brain_sql.connect(tmp_path / "brain.db")
    if files == 1:
        brain_sql.ingest(conn, [transcript(tmp_path, said)])
        deleted, edited, quoting = "T4", "T3", "T6"
    else:
        for name, part in (("a", said[:4]), ("b", said[4:])):
            (tmp_path / name).mkdir()
            brain_sql.ingest(conn, [transcript(tmp_path / name, part)])
        deleted, edited, quoting = "T5", "T4", "T6"
    kept = quotes(conn, quoting).splitlines()
    conn.execute("delete from knowledge where external_id = ?", [deleted])
    conn.execute("update knowledge set content = 'TAMPERED' where external_id = ?", [edited])
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, quoting).splitlines() == [line for line in kept if f"Turn {deleted[1]} " not in line]


@pytest.mark.parametrize(
    "deleted, edited, expected",
    [
        (["T3"], ["T4"], ["Bob: EDITED T4"]),  # the deleted turn's quote goes, the edited one's is restated
        ([], ["T3", "T4"], ["Ann: EDITED T3", "Bob: EDITED T4"]),
        (["T4"], ["T3"], ["Ann: EDITED T3"]),  # review 72: the edited turn before a deleted one
    ],
)
def test_repair_restates_each_edited_turns_quote_though_stale_lines_run_together(tmp_path, deleted, edited, expected):
    """Review 71: the stale lines of two turns in a row were read as one quote, so a
    deleted turn's line and an edited turn's were restated, or dropped, together."""
    said = [
        {"_id": f"T{i}", "text": f"Turn {i} says thing {i}.", "speaker": "Ann" if i % 2 else "Bob"} for i in range(1, 7)
    ]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    for turn in deleted:
        conn.execute("delete from knowledge where external_id = ?", [turn])
    for turn in edited:
        conn.execute("update knowledge set content = ? where external_id = ?", [f"EDITED {turn}", turn])
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "T5").splitlines() == ["Ann, 8 May 2023", *expected]


def test_check_reads_a_context_left_on_a_memory_plain_sql_made_no_turn(conn, tmp_path):
    """A turn whose speaker plain SQL removed keeps its context, which no session
    holds: check raised KeyError on its stale quote."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    conn.execute("update knowledge set metadata = json_remove(metadata, '$.speaker') where external_id = 'S1:3'")
    conn.execute("delete from knowledge where external_id = 'S1:2'")
    assert "stale_quotes" in brain_sql.check(conn)
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}


def test_a_turn_whose_text_has_a_line_like_another_speakers_is_restated_whole(tmp_path):
    """Review 72: T2's second line begins "Bob: ", and cut there its old quote was two
    parts, neither of which T2 (Ann's) fitted alone: T3 lost its quote of T2."""
    said = [
        {"_id": "T1", "text": "Turn 1.", "speaker": "Bob"},
        {"_id": "T2", "text": "Turn 2 line one\nBob: as Bob would say", "speaker": "Ann"},
        {"_id": "T3", "text": "Turn 3.", "speaker": "Bob"},
    ]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    conn.execute("update knowledge set content = 'EDITED two' where external_id = 'T2'")
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "T3").splitlines() == ["Bob, 8 May 2023", "Bob: Turn 1.", "Ann: EDITED two"]


@pytest.mark.parametrize(
    "arrangement, gone",
    [
        # T4 quotes T2, whose second line is T3's quote, and T3
        ([("Ann", "Turn 1."), ("Bob", "hm\nAnn: yes\nmore"), ("Ann", "yes"), ("Bob", "Turn 4.")], "T3"),
        # T2 and T3 quote T1, whose second line is T4's quote; T4 is in no window of theirs
        ([("Bob", "hm\nAnn: yes\nmore"), ("Bob", "x"), ("Bob", "y"), ("Ann", "yes"), ("Bob", "z"), ("Bob", "w")], "T4"),
    ],
)
def test_repair_drops_the_turn_s_quote_never_a_line_of_another_quote(tmp_path, arrangement, gone):
    """Review 72 (Q6): check's repair dropped a quote by its first matching line, which
    may be a line of another turn's quote: that quote lost a line, and check named it
    stale ever after."""
    said = [{"_id": f"T{i}", "text": text, "speaker": speaker} for i, (speaker, text) in enumerate(arrangement, 1)]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    before = {f"T{i}": quotes(conn, f"T{i}") for i in range(1, len(said) + 1) if f"T{i}" != gone}
    conn.execute("delete from knowledge where external_id = ?", [gone])
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    for turn, context in before.items():
        lines = context.splitlines()
        if "Ann: yes" in lines[1:] and turn > gone:  # its quote of the gone turn is the last of its lines "Ann: yes"
            at = len(lines) - 1 - lines[::-1].index("Ann: yes")
            lines = lines[:at] + lines[at + 1 :]
        assert quotes(conn, turn).splitlines() == lines, turn


def _changed(conn, turn, how):
    """Forget, flag or correct (remember again with other words) the stored turn `turn`."""
    if how == "forget":
        brain_sql.forget(conn, external_ids=[turn])
    elif how == "flag":
        brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = ?", [turn]).fetchone()[0]])
    else:
        speaker = json.loads(conn.execute("select metadata from knowledge where external_id = ?", [turn]).fetchone()[0])
        record = {"_id": turn, "speaker": speaker["speaker"], "text": "zz", "session_id": "chat/1"}
        assert not remember(conn, [{**record, "observed_at": "2023-05-08T13:56:00"}])[0].errors


@pytest.mark.parametrize("how", ["forget", "flag", "correct"])
@pytest.mark.parametrize(
    "arrangement, changed, read, before, after",
    [
        # the words of T1, said once, are the first line of T3's quote in T4's context
        (
            [("Bob", "Ann: x"), ("Carl", "c"), ("Bob", "Ann: x\nAnn: a"), ("Dan", "d")],
            "T1",
            "T4",
            ["Carl: c", "Bob: Ann: x", "Ann: a"],
            {"forget": ["Carl: c", "Bob: Ann: x", "Ann: a"], "correct": ["Carl: c", "Bob: Ann: x", "Ann: a"]},
        ),
        # review 74 (H2): T4 pastes T1 and T2 word for word; T3, before it, quotes them, never T4
        (
            [
                ("Ann", "Friday?"),
                ("Bob", "Yes, 7pm."),
                ("Carl", "ok"),
                ("Ann", "Friday?\nBob: Yes, 7pm."),
                ("Dan", "d"),
            ],
            "T4",
            "T3",
            ["Ann: Friday?", "Bob: Yes, 7pm."],
            {"forget": ["Ann: Friday?", "Bob: Yes, 7pm."], "correct": ["Ann: Friday?", "Bob: Yes, 7pm."]},
        ),
        (
            [
                ("Ann", "Friday?"),
                ("Bob", "Yes, 7pm."),
                ("Carl", "ok"),
                ("Ann", "Friday?\nBob: Yes, 7pm."),
                ("Dan", "d"),
            ],
            "T1",
            "T3",
            ["Ann: Friday?", "Bob: Yes, 7pm."],
            {"forget": ["Bob: Yes, 7pm."], "correct": ["Ann: zz", "Bob: Yes, 7pm."]},
        ),
        # review 74 (H1): T1's words are the first lines of T2's; T3 quotes both
        (
            [("Ann", "a\nx"), ("Ann", "a\nx\nAnn: a"), ("Carl", "c"), ("Dan", "d")],
            "T1",
            "T3",
            ["Ann: a", "x", "Ann: a", "x", "Ann: a"],
            {"forget": ["Ann: a", "x", "Ann: a"], "correct": ["Ann: zz", "Ann: a", "x", "Ann: a"]},
        ),
        # review 75 (M2): T3 quotes T1 then T2, three lines "Ann: a" that T2 then T1 would make too
        (
            [("Ann", "a"), ("Ann", "a\nAnn: a"), ("Carl", "c")],
            "T1",
            "T3",
            ["Ann: a", "Ann: a", "Ann: a"],
            {"forget": ["Ann: a", "Ann: a"], "correct": ["Ann: zz", "Ann: a", "Ann: a"]},
        ),
        # review 74 (M1): T2's quote is found twice in T3's, once beginning inside T1's
        (
            [("Bob", "b\nAnn: a"), ("Ann", "a\nAnn: a"), ("Carl", "c")],
            "T2",
            "T3",
            ["Bob: b", "Ann: a", "Ann: a", "Ann: a"],
            {"forget": ["Bob: b", "Ann: a"], "correct": ["Bob: b", "Ann: a", "Ann: zz"]},
        ),
        # T3 quotes T1 and T2, which together say T3's own words: read as two quotes, as check reads them
        (
            [("Bob", "Ann: x"), ("Ann", "x"), ("Bob", "Ann: x\nAnn: x")],
            "T2",
            "T3",
            ["Bob: Ann: x", "Ann: x"],
            {"forget": ["Bob: Ann: x"], "correct": ["Bob: Ann: x", "Ann: zz"]},
        ),
        # review 78 (H1): T1, before them, pastes T2's and T3's words, which T4 quotes as two turns
        (
            [("Ann", "x\nBob: y"), ("Ann", "x"), ("Bob", "y"), ("Carl", "c")],
            "T2",
            "T4",
            ["Ann: x", "Bob: y"],
            {"forget": ["Bob: y"], "correct": ["Ann: zz", "Bob: y"]},
        ),
        # and the pasting turn changed leaves T4's quotes as they are
        (
            [("Ann", "x\nBob: y"), ("Ann", "x"), ("Bob", "y"), ("Carl", "c")],
            "T1",
            "T4",
            ["Ann: x", "Bob: y"],
            {"forget": ["Ann: x", "Bob: y"], "correct": ["Ann: x", "Bob: y"]},
        ),
    ],
)
def test_a_turn_s_quote_is_told_from_other_turns_words_like_it(
    tmp_path, arrangement, changed, read, before, after, how
):
    """Review 74 (Q6, the writer's side): forget, flag and a correction dropped or
    restated the first match of a turn's words, which may be a line of another
    turn's quote. The quote dropped or restated is the one check reads as the
    turn's. A flagged turn is quoted by none, as a forgotten one."""
    said = [{"_id": f"T{i}", "text": text, "speaker": speaker} for i, (speaker, text) in enumerate(arrangement, 1)]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    assert brain_sql.check(conn) == {}
    assert quotes(conn, read).splitlines()[1:] == before
    _changed(conn, changed, how)
    assert quotes(conn, read).splitlines()[1:] == after["forget" if how == "flag" else how]
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("again", [False, True])
@pytest.mark.parametrize("how", ["forget", "flag", "correct"])
def test_a_turn_inserted_into_its_file_later_is_told_from_the_window_s_turns(tmp_path, how, again):
    """Review 77: X, inserted between T1 and T2 when the file is ingested again, is
    stored last, so by the order stored T2's window is T0 and T1, whose words joined
    are T1's and X's: T2's quotes are T1 and X, as the file says, and changing X
    changes X's quote only. Review 79: so too once X is remembered again as it was
    (a turn of no file since). X's own context is read as its quotes of T0 and T1."""
    said = [
        ("T0", "Ann", "a\nBob: b"),
        ("T1", "Ann", "a\nBob: b\nAnn: a"),
        ("X", "Bob", "b\nAnn: a"),
        ("T2", "Carl", "c"),
    ]
    records = [{"_id": i, "speaker": speaker, "text": text} for i, speaker, text in said]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, [r for r in records if r["_id"] != "X"])])
    brain_sql.ingest(conn, [transcript(tmp_path, records)])
    assert quotes(conn, "T2").splitlines()[1:] == ["Ann: a", "Bob: b", "Ann: a", "Bob: b", "Ann: a"]
    # X's own context quotes T0 and T1, whose lines the longest cut read as T1 and then X's own words:
    # check named it stale, and repair cut it short
    fresh = {external_id: context for external_id, context in rows(conn, "select external_id, context from knowledge")}
    assert brain_sql.check(conn) == {}
    brain_sql.check(conn, repair=True)
    assert dict(rows(conn, "select external_id, context from knowledge")) == fresh
    if again:
        assert not remember(conn, [{**records[2], "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}])[
            0
        ].errors
    _changed(conn, "X", how)
    kept = {"forget": [], "flag": [], "correct": ["Bob: zz"]}[how]
    assert quotes(conn, "T2").splitlines()[1:] == ["Ann: a", "Bob: b", "Ann: a"] + kept
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("flagged", ["T1", "T2"])
@pytest.mark.parametrize("where", ["notes", "before"])
def test_a_turn_flagged_with_plain_sql_is_found_in_a_window_another_turn_pastes(tmp_path, flagged, where):
    """Review 79: P says T1's and T2's words joined, in another file or before them in
    theirs; plain SQL flags T1 or T2. check names T3's quote of it, and repair drops
    that quote alone."""
    pasting = {"_id": "P", "speaker": "Ann", "text": "x\nBob: y"}
    chat = [{"_id": "T1", "speaker": "Ann", "text": "x"}, {"_id": "T2", "speaker": "Bob", "text": "y"}]
    chat.append({"_id": "T3", "speaker": "Carl", "text": "c"})
    conn = brain_sql.connect(tmp_path / "brain.db")
    if where == "notes":
        line = json.dumps({**pasting, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"})
        brain_sql.ingest(conn, [write(tmp_path / "notes.jsonl", line + "\n")])
    else:
        chat = [pasting, {"_id": "F", "speaker": "Eve", "text": "f"}] + chat
    brain_sql.ingest(conn, [transcript(tmp_path, chat)])
    conn.execute("update knowledge set flagged = 1 where external_id = ?", [flagged])
    conn.commit()
    t3 = conn.execute("select document_id from knowledge where external_id = 'T3'").fetchone()[0]
    assert t3 in brain_sql.check(conn)["stale_quotes"]
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "T3").splitlines()[1:] == {"T1": ["Bob: y"], "T2": ["Ann: x"]}[flagged]


@pytest.mark.parametrize("again", [False, True])
def test_a_turn_inserted_later_pasting_the_window_s_words_is_still_quoted_once_one_is_flagged(tmp_path, again):
    """Review 78: X, inserted into the file later (stored last), says T1's and T2's
    words joined; T3 quotes T2 and X. Flagging T2 leaves X's quote, which is the
    words of T3's window as stored, T1 and T2: a flagged turn is quoted by none, so
    it is X's, and check names nothing. So too once X is remembered again as it was
    (a turn of no file since, as a turn of its file)."""
    said = [("T1", "Ann", "a"), ("T2", "Bob", "b"), ("X", "Ann", "a\nBob: b"), ("T3", "Carl", "c")]
    records = [{"_id": i, "speaker": speaker, "text": text} for i, speaker, text in said]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, [r for r in records if r["_id"] != "X"])])
    brain_sql.ingest(conn, [transcript(tmp_path, records)])
    assert quotes(conn, "T3").splitlines()[1:] == ["Bob: b", "Ann: a", "Bob: b"]
    if again:
        assert not remember(conn, [{**records[2], "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}])[
            0
        ].errors
        assert quotes(conn, "T3").splitlines()[1:] == ["Bob: b", "Ann: a", "Bob: b"]
    _changed(conn, "T2", "flag")
    assert quotes(conn, "T3").splitlines()[1:] == ["Ann: a", "Bob: b"]
    assert brain_sql.check(conn) == {}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "T3").splitlines()[1:] == ["Ann: a", "Bob: b"]


@pytest.mark.parametrize("how", ["forget", "flag", "correct"])
@pytest.mark.parametrize("changed", ["P", "T1"])
@pytest.mark.parametrize("first", ["notes", "chat"])
def test_a_turn_of_another_file_pasting_the_window_s_words_is_never_its_quote(tmp_path, how, changed, first):
    """Review 78 (H2): P, in another file of the session, says T1's and T2's words
    joined. T3 quotes T1 and T2, its file's turns: changing T1 restates T1's quote,
    and changing P none, whichever file was stored first."""
    files = {
        "notes": [{"_id": "P", "speaker": "Ann", "text": "x\nBob: y"}],
        "chat": [{"_id": "T1", "speaker": "Ann", "text": "x"}, {"_id": "T2", "speaker": "Bob", "text": "y"}],
    }
    files["chat"].append({"_id": "T3", "speaker": "Carl", "text": "c"})
    conn = brain_sql.connect(tmp_path / "brain.db")
    for name in [first, *(set(files) - {first})]:
        lines = [json.dumps({**t, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}) for t in files[name]]
        assert not brain_sql.ingest(conn, [write(tmp_path / f"{name}.jsonl", "\n".join(lines) + "\n")]).errors
    assert quotes(conn, "T3").splitlines()[1:] == ["Ann: x", "Bob: y"]
    _changed(conn, changed, how)
    after = {"forget": ["Bob: y"], "flag": ["Bob: y"], "correct": ["Ann: zz", "Bob: y"]}[how]
    assert quotes(conn, "T3").splitlines()[1:] == (after if changed == "T1" else ["Ann: x", "Bob: y"])
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("far", [False, True])
def test_a_flagged_turn_pasting_a_window_s_words_leaves_the_quotes_of_that_window_whole(tmp_path, far):
    """Review 78 (M1): P, flagged, says T1's and T2's words joined, in another file
    or far back in T3's: check read T3's fresh quotes of T1 and T2 as one of P, named
    them stale, and repair dropped both."""
    pasting = {"_id": "P", "speaker": "Ann", "text": "x\nBob: y"}
    chat = [{"_id": "T1", "speaker": "Ann", "text": "x"}, {"_id": "T2", "speaker": "Bob", "text": "y"}]
    chat.append({"_id": "T3", "speaker": "Carl", "text": "c"})
    conn = brain_sql.connect(tmp_path / "brain.db")
    if far:
        chat = [pasting, {"_id": "F", "speaker": "Eve", "text": "f"}] + chat
        brain_sql.ingest(conn, [transcript(tmp_path, chat[:2])])
    else:
        line = json.dumps({**pasting, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"})
        brain_sql.ingest(conn, [write(tmp_path / "notes.jsonl", line + "\n")])
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = 'P'").fetchone()[0]])
    brain_sql.ingest(conn, [transcript(tmp_path, chat)])
    assert brain_sql.check(conn) == {}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "T3").splitlines()[1:] == ["Ann: x", "Bob: y"]


def test_a_speaker_renamed_in_bulk_with_plain_sql_is_quoted_by_the_new_name(tmp_path):
    """Review 71: two turns in a row by one speaker, renamed by one plain SQL update:
    the turns after them quoted only one of them."""
    said = [{"_id": f"T{i}", "text": f"Turn {i}.", "speaker": "Mel" if i % 3 == 0 else "Caro"} for i in range(1, 7)]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    conn.execute(
        "update knowledge set metadata = json_set(metadata, '$.speaker', 'Caroline') "
        "where json_extract(metadata, '$.speaker') = 'Caro'"
    )
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "T3").splitlines() == ["Mel, 8 May 2023", "Caroline: Turn 1.", "Caroline: Turn 2."]


def test_a_turn_whose_day_plain_sql_changed_is_said_on_its_new_day(conn, tmp_path):
    """A turn's context begins with its speaker and day and its time phrases read
    against that day: when plain SQL moves the turn to another day, check names
    it and repair restates them (a turn whose record named no day keeps none)."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    remember(conn, [{"_id": "S2:1", "text": "Morning all.", "speaker": "Ann", "session_id": "chat/2"}])
    conn.execute("update knowledge set observed_at = '2024-01-10 09:00:00' where external_id = 'S1:3'")
    moved = conn.execute("select document_id from knowledge where external_id = 'S1:3'").fetchone()[0]
    assert brain_sql.check(conn)["stale_own_lines"] == [moved]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "S1:3").splitlines() == [
        "Caroline, 10 January 2024",
        "yesterday: 9 January 2024",
        f"Caroline: {TURNS[0]['text']}",
        f"Melanie: {TURNS[1]['text']}",
    ]
    assert quotes(conn, "S2:1") == "Ann"
    hits = brain_sql.recall(conn, {"q": "support group 9 January 2024", "k": 1, "cutoff": False})["hits"]
    assert hits[0]["external_id"] == "S1:3"


def test_a_context_an_earlier_version_dated_is_named_by_check_and_restated(conn, tmp_path):
    """A context written before "the day before yesterday" was read as two days back
    said it was yesterday: check names the turn, and repair restates its day."""
    said = [{"_id": "S1:1", "text": "We hiked the day before yesterday.", "speaker": "Melanie"}]
    brain_sql.ingest(conn, [transcript(tmp_path, said)])
    assert quotes(conn, "S1:1").splitlines() == ["Melanie, 8 May 2023", "the day before yesterday: 6 May 2023"]
    conn.execute(
        "update knowledge set context = ? where external_id = 'S1:1'", ["Melanie, 8 May 2023\nyesterday: 7 May 2023"]
    )
    turn = conn.execute("select document_id from knowledge where external_id = 'S1:1'").fetchone()[0]
    assert brain_sql.check(conn) == {"stale_own_lines": [turn]}
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "S1:1").splitlines() == ["Melanie, 8 May 2023", "the day before yesterday: 6 May 2023"]


def test_a_speaker_named_like_a_time_phrase_is_quoted_not_read_as_one(conn, tmp_path):
    """A quote of a speaker called "Last Friday" is no resolved time line of the turn
    after (review 65): when plain SQL edits her turn, repair restates the quote where
    it had dropped it, and check then finds the brain whole."""
    said = [("B", "hello there"), ("Last Friday", "first words"), ("A", "second words"), ("B", "third, yesterday")]
    turns = [{"_id": f"P:{i + 1}", "text": text, "speaker": who} for i, (who, text) in enumerate(said)]
    brain_sql.ingest(conn, [transcript(tmp_path, turns)])
    conn.execute("update knowledge set content = 'first words, edited' where external_id = 'P:2'")
    assert len(brain_sql.check(conn)["stale_quotes"]) == 2  # P:3 and P:4 quote her
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "P:4").splitlines() == [
        "B, 8 May 2023",
        "yesterday: 7 May 2023",
        "Last Friday: first words, edited",
        "A: second words",
    ]


@pytest.mark.parametrize(
    "speaker, renamed",
    [
        ("Caroline", "Ann"),
        ("Caroline", "Carol"),  # the new name begins the old one
        ("Bo\nB", "Ann"),  # the old name spans two lines
        ("Ann", "Bo\nB"),
    ],
)
def test_a_turn_whose_speaker_plain_sql_changed_keeps_its_day(tmp_path, speaker, renamed):
    """A turn's context begins with its speaker and its day: when plain SQL gives the
    turn another speaker, repair names the new one on the same day, keeps its time
    phrases, and quotes it by its new name in the turns after it, as renaming it
    through remember does."""
    turns = [{**t, "speaker": speaker} if t["_id"] == "S1:3" else t for t in TURNS]
    contexts = []
    for way in ("sql", "remember"):
        conn = brain_sql.connect(tmp_path / f"{way}.db")
        brain_sql.ingest(conn, [transcript(tmp_path, turns)])
        if way == "sql":
            conn.execute(
                "update knowledge set metadata = json_set(metadata, '$.speaker', ?) where external_id = 'S1:3'",
                [renamed],
            )
            renamed_turn = conn.execute("select document_id from knowledge where external_id = 'S1:3'").fetchone()[0]
            assert renamed_turn in brain_sql.check(conn)["stale_own_lines"]
            assert "unrepaired" not in brain_sql.check(conn, repair=True)
            assert brain_sql.check(conn) == {}
        else:
            remember(
                conn, [{**turns[2], "speaker": renamed, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}]
            )
        contexts.append({t["_id"]: quotes(conn, t["_id"]) for t in TURNS})
    assert contexts[0]["S1:3"] == "\n".join(
        [f"{renamed}, 8 May 2023", "yesterday: 7 May 2023"] + [f"{t['speaker']}: {t['text']}" for t in TURNS[:2]]
    )
    # the turns after it, as remember leaves them (remember's own context of it quotes the turns stored last)
    assert {k: v for k, v in contexts[0].items() if k != "S1:3"} == {
        k: v for k, v in contexts[1].items() if k != "S1:3"
    }
    assert f"{renamed}: {TURNS[2]['text']}" in contexts[0]["S1:4"]


def test_a_quoted_turn_given_another_day_changes_only_its_own_lines(tmp_path):
    """A quote names its turn's speaker and words, never its day (turns follow each
    other in file order, not by date): a turn that plain SQL moves to another day is
    stale in its own lines alone, and the repaired brain holds the contexts of one
    whose file gave that day."""
    conn = brain_sql.connect(tmp_path / "sql.db")
    brain_sql.ingest(conn, [transcript(tmp_path)])
    conn.execute("update knowledge set observed_at = '2024-01-10 09:00:00' where external_id = 'S1:3'")
    moved = conn.execute("select document_id from knowledge where external_id = 'S1:3'").fetchone()[0]
    assert brain_sql.check(conn) == {"stale_own_lines": [moved]}
    brain_sql.check(conn, repair=True)
    dated = brain_sql.connect(tmp_path / "dated.db")
    lines = [
        json.dumps(
            {
                **t,
                "session_id": "chat/1",
                "observed_at": "2024-01-10 09:00:00" if t["_id"] == "S1:3" else "2023-05-08T13:56:00",
            }
        )
        for t in TURNS
    ]
    brain_sql.ingest(dated, [write(tmp_path / "dated" / "chat.jsonl", "\n".join(lines) + "\n")])
    assert [quotes(conn, t["_id"]) for t in TURNS] == [quotes(dated, t["_id"]) for t in TURNS]


@pytest.mark.parametrize("parent", ["/", "/a"])
def test_a_turn_moved_to_a_parent_scope_is_unquoted_as_remember_moves_it(tmp_path, parent):
    """Its readers could read a parent scope anyway, but a turn is quoted only in its
    own scope: forgetting, flagging or correcting it restates the quotes of its
    scope alone. So a turn moved up with plain SQL is found, repair drops its quotes
    as moving it through remember does (and its own quotes of the scope it left:
    readers of the parent may not read them), and forgetting it then leaves its words
    in no context."""
    turns = [{**t, "scope": "/a/b"} for t in TURNS]
    contexts = []
    for way in ("sql", "remember"):
        conn = brain_sql.connect(tmp_path / f"{way}.db")
        brain_sql.ingest(conn, [transcript(tmp_path, turns)])
        if way == "sql":
            conn.execute("update knowledge set scope = ? where external_id = 'S1:3'", [parent])
            stale = rows(
                conn, "select document_id from knowledge where external_id in ('S1:3', 'S1:4', 'S1:5') order by 1"
            )
            assert brain_sql.check(conn) == {"stale_quotes": [row[0] for row in stale]}
            brain_sql.check(conn, repair=True)
            assert brain_sql.check(conn) == {}
        else:
            remember(
                conn, [{**turns[2], "scope": parent, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}]
            )
        contexts.append([quotes(conn, t["_id"]) for t in TURNS])
    assert contexts[0] == contexts[1]
    assert "support group" not in contexts[0][3] + contexts[0][4]
    brain_sql.forget(conn, ids=[conn.execute("select id from knowledge where external_id = 'S1:3'").fetchone()[0]])
    assert not rows(conn, "select id from knowledge where context like '%support group%'")


def test_a_turn_given_a_day_no_calendar_has_keeps_its_own_lines(conn, tmp_path):
    """29 February 2023 reads as no day to the turn's own lines (SQLite takes it
    for 1 March): check names the value, and --repair refuses it, changing nothing,
    instead of writing the turn's lines again without its day."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    without_rules(conn)  # as a brain written before they refused it
    conn.execute("update knowledge set observed_at = '2023-02-29 10:00:00' where external_id = 'S1:3'")
    before = by_external_id(conn)
    found = brain_sql.check(conn)
    assert list(found) == ["invalid_values"] and "observed_at: '2023-02-29 10:00:00'" in found["invalid_values"][0]
    with pytest.raises(brain_sql.BrainError, match="cannot tell what these values should be"):
        brain_sql.check(conn, repair=True)
    assert by_external_id(conn) == before


@pytest.mark.parametrize("batch", [1000, 1])
def test_a_flagged_turn_moved_to_another_transcript_stays_flagged_and_unquoted(conn, tmp_path, monkeypatch, batch):
    """A transcript renamed (its turns removed and written anew) brought a flagged
    turn back into recall, and the turns after it quoted it again; across batches too."""
    monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", batch)
    first = transcript(tmp_path)
    write(tmp_path / "keep.md", "# Keep\n\nA note that stays.\n")
    brain_sql.ingest(conn, [tmp_path])
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = 'S1:2'").fetchone()[0]])
    first.rename(tmp_path / "renamed.jsonl")
    brain_sql.ingest(conn, [tmp_path], prune=True)
    assert rows(
        conn, "select source_path like '%renamed.jsonl', flagged from knowledge where external_id = 'S1:2'"
    ) == [(1, 1)]
    assert "lighthouse" not in quotes(conn, "S1:3") + quotes(conn, "S1:4")
    assert brain_sql.check(conn) == {}


def test_a_deleted_flagged_turn_hides_no_turn_of_another_session(conn, tmp_path):
    """A flagged "Sure." deleted from its transcript, in the run that ingests a new
    transcript of another session saying "Sure." too, wrote that other turn flagged
    and left it unquoted. A turn's text carries a flag only within its session."""
    lines = [
        {"_id": "a1", "speaker": "Ann", "text": "Can you send the vault code?"},
        {"_id": "a2", "speaker": "Bo", "text": "Sure."},
        {"_id": "a3", "speaker": "Bo", "text": "It is 4711."},
    ]
    old = transcript(tmp_path, lines, session="s1")
    brain_sql.ingest(conn, [tmp_path])
    brain_sql.flag(conn, [i for (i,) in conn.execute("select id from knowledge where external_id = 'a2'")])
    write(old, "\n".join(json.dumps({**t, "session_id": "s1"}) for t in lines[:1]) + "\n")
    later = [
        {"_id": "b1", "speaker": "Cy", "text": "Will you water the roses?"},
        {"_id": "b2", "speaker": "Di", "text": "Sure."},
        {"_id": "b3", "speaker": "Di", "text": "Every morning."},
    ]
    write(tmp_path / "later.jsonl", "\n".join(json.dumps({**t, "session_id": "s2"}) for t in later) + "\n")
    brain_sql.ingest(conn, [tmp_path])
    assert rows(conn, "select flagged from knowledge where external_id = 'b2'") == [(0,)]
    assert "Di: Sure." in quotes(conn, "b3")
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("session", [7, " s1 ", "", None, 12345678901234567890])
def test_a_session_given_as_a_number_or_with_spaces_is_one_session_everywhere(conn, tmp_path, session):
    """A turn's session 7 or " s1 " was "7" or "s1" to the turns ingested and 7 or
    " s1 " to SQL: flagging, forgetting or pruning such a turn raised StopIteration
    (a whole ingest stopped), and so did a turn whose session_id is "" beside a
    thread_id; a number past 64 bits was 1.2e19 to SQL, and its flagged turn stayed
    quoted. The session is read alike on both sides now."""
    keys = {"session_id": session, "thread_id": "t9"} if session in ("", None) else {"session_id": session}
    keys = {k: v for k, v in keys.items() if v is not None}
    lines = [
        {"_id": "a1", "speaker": "Ann", "text": "Did the lighthouse tour happen?"},
        {"_id": "a2", "speaker": "Bo", "text": "Yes, we saw the grey seals."},
        {"_id": "a3", "speaker": "Bo", "text": "The kids loved it."},
    ]
    path = write(tmp_path / "chat.jsonl", "\n".join(json.dumps({**t, **keys}) for t in lines) + "\n")
    write(tmp_path / "keep.md", "# Keep\n\nA note that stays.\n")
    brain_sql.ingest(conn, [tmp_path])
    assert "Bo: Yes, we saw the grey seals." in quotes(conn, "a3")
    (turn,) = [i for (i,) in conn.execute("select id from knowledge where external_id = 'a2'")]
    assert brain_sql.flag(conn, [turn])["changed"] == [turn]
    assert "seals" not in quotes(conn, "a3") and brain_sql.check(conn) == {}
    path.rename(tmp_path / "renamed.jsonl")
    report = brain_sql.ingest(conn, [tmp_path], prune=True)
    assert not report.errors and rows(conn, "select flagged from knowledge where external_id = 'a2'") == [(1,)]
    brain_sql.forget(conn, external_ids=["a2"])
    assert "seals" not in quotes(conn, "a3") and brain_sql.check(conn) == {}


def test_a_flagged_record_naming_a_thread_but_no_speaker_keeps_its_flag_when_moved(conn, tmp_path):
    """A record with a thread_id and no speaker is no turn: its text carries its flag
    to a copy in another file whatever the thread. It lost it when the copy came
    after the removal: the session was read for the removed memory, not for its copy."""
    record, other = {"text": "Ship the release on Friday.", "thread_id": "t9"}, {"text": "Stays here."}
    write(tmp_path / "a.jsonl", json.dumps(record) + "\n" + json.dumps(other) + "\n")
    brain_sql.ingest(conn, [tmp_path])
    brain_sql.flag(conn, [i for (i,) in conn.execute("select id from knowledge where content like 'Ship%'")])
    write(tmp_path / "a.jsonl", json.dumps(other) + "\n")  # read first: removed before its copy is written
    write(tmp_path / "b.jsonl", json.dumps(record) + "\n")
    report = brain_sql.ingest(conn, [tmp_path])
    assert report.chunks_carried_flag == 1
    assert rows(conn, "select source_path like '%b.jsonl', flagged from knowledge where content like 'Ship%'") == [
        (1, 1)
    ]


def test_records_naming_a_session_but_no_speaker_take_no_place_in_a_turns_context(conn):
    """Turns remembered one at a time are quoted from the stored turns before them:
    the last CONVERSATION_CONTEXT_TURNS were taken before leaving out the records
    that name the session but no speaker (no turns), so those pushed the turns out."""
    said = [
        {"_id": "b1", "speaker": "Ann", "text": "We adopted a cat named Pixel."},
        {"_id": "n1", "text": "System note: transcript paused."},
        {"_id": "n2", "text": "System note: transcript resumed."},
        {"_id": "b2", "speaker": "Bo", "text": "What colour is it?"},
    ]
    for record in said:
        assert not brain_sql.remember(conn, [{**record, "session_id": "s"}])[0].errors
    assert "Ann: We adopted a cat named Pixel." in quotes(conn, "b2")
    assert brain_sql.check(conn) == {}


def test_a_session_spelled_with_a_json_escape_is_found_alike(conn, tmp_path):
    """Metadata another program wrote with an escape ("s\\u0031" is "s1") is the same
    session: a flagged turn there was still quoted when the session's rows were
    looked for in the metadata's text alone."""
    said = [
        {"_id": "y", "speaker": "Ann", "text": "The lighthouse tour was cancelled due to fog."},
        {"_id": "z", "speaker": "Bo", "text": "Then we should book the seal boat instead."},
    ]
    write(tmp_path / "chat.jsonl", "\n".join(json.dumps({**t, "session_id": "s1"}) for t in said) + "\n")
    brain_sql.ingest(conn, [tmp_path])
    with conn:
        conn.execute("update knowledge set metadata = replace(metadata, '\"s1\"', '\"s\\u0031\"')")
    assert brain_sql.check(conn) == {} and "fog" in quotes(conn, "z")
    brain_sql.flag(conn, [i for (i,) in conn.execute("select id from knowledge where external_id = 'y'")])
    assert "fog" not in quotes(conn, "z") and brain_sql.check(conn) == {}


@pytest.mark.parametrize("change", ["delete", "flag", "edit"])
def test_a_turn_said_again_in_another_file_keeps_its_quote_when_the_first_goes(conn, tmp_path, change):
    """A turn given in a.jsonl and again, later, in b.jsonl (a transcript moved
    over two ingests): the turn after b.jsonl's quotes b.jsonl's. Deleting,
    flagging or correcting a.jsonl's dropped that quote too, silently (check saw
    nothing): the turn after a surviving, unflagged turn lost its context."""
    said = {"_id": "y", "speaker": "Ann", "session_id": "s1", "text": "The lighthouse tour was cancelled due to fog."}
    after = {"_id": "z", "speaker": "Bo", "session_id": "s1", "text": "Then we should book the seal boat instead."}
    note = {"_id": "o", "text": "An unrelated note."}
    first = write(tmp_path / "a.jsonl", f"{json.dumps(said)}\n{json.dumps(note)}\n")
    brain_sql.ingest(conn, [tmp_path])
    write(tmp_path / "b.jsonl", f"{json.dumps(said)}\n{json.dumps(after)}\n")
    brain_sql.ingest(conn, [tmp_path])
    assert quotes(conn, "z") == "Bo\nAnn: The lighthouse tour was cancelled due to fog."
    if change == "flag":
        brain_sql.flag(conn, [conn.execute("select min(id) from knowledge where external_id = 'y'").fetchone()[0]])
    else:
        edited = [{**said, "text": "The lighthouse tour is on."}] if change == "edit" else []
        write(first, "".join(json.dumps(record) + "\n" for record in [*edited, note]))
        brain_sql.ingest(conn, [tmp_path], prune=True)
    assert quotes(conn, "z") == "Bo\nAnn: The lighthouse tour was cancelled due to fog."
    assert brain_sql.check(conn) == {}


def contexts(conn):
    """{(file name, _id): context} of the stored turns."""
    return {
        (path.rsplit("/", 1)[-1], external_id): context
        for path, external_id, context in rows(conn, "select source_path, external_id, context from knowledge")
    }


def jsonl(path, records):
    return write(path, "".join(json.dumps({"session_id": "s1", **r}) + "\n" for r in records))


FOG = [
    {"_id": "t2", "speaker": "Ann", "text": "Fog again."},
    {"_id": "t1", "speaker": "Ann", "text": "Fog again."},
    {"_id": "f", "speaker": "Bo", "text": "Boat then."},
    {"_id": "g", "speaker": "Cy", "text": "Ok."},
]


@pytest.mark.parametrize(
    "steps",
    [
        [("flag", "t1"), ("forget", "t2")],
        [("flag", "t1"), ("flag", "t2")],
        [("flag", "t1"), ("edit", "t2")],
        [("forget", "t1 t2")],
        [("flag", "t1 t2")],
        [("edit", "t1"), ("edit", "t2")],
        [("edit", "t2"), ("forget", "t1")],
    ],
)
def test_turns_saying_the_same_are_requoted_as_check_reads_them(conn, tmp_path, steps):
    """Two turns saying the same, both quoted by the next: a flag on one counted it
    still, two removed at once were restated in the order of their ids, and a
    correction of one put its new words in the wrong place: the follower kept a
    forgotten or flagged turn's quote (check named it) or quoted in another order
    than a brain made again from the files. Which turn a quote is of is now read
    one way, by the writer and by check."""
    path = jsonl(tmp_path / "a.jsonl", FOG)
    brain_sql.ingest(conn, [tmp_path])
    said, hidden, gone = list(FOG), set(), set()  # a forgotten turn, as a flagged one, keeps its place unquoted
    for step, names in steps:
        names = names.split()
        ids = [
            i
            for (i,) in conn.execute(
                "select id from knowledge where external_id in (select value from json_each(?))", [json.dumps(names)]
            )
        ]
        if step == "flag":
            brain_sql.flag(conn, ids)
        elif step == "forget":
            brain_sql.forget(conn, ids=ids)
            gone.update(names)
        else:
            said = [{**r, "text": f"Sun for {r['_id']}."} if r["_id"] in names else r for r in said]
        hidden.update(names if step != "edit" else ())
        jsonl(path, [r for r in said if r["_id"] not in gone])
        brain_sql.ingest(conn, [tmp_path])
    assert brain_sql.check(conn) == {}
    # as the file says it: each turn quotes the two before it, but for those flagged or forgotten
    assert contexts(conn) == {
        ("a.jsonl", r["_id"]): "\n".join(
            [r["speaker"]] + [f"{q['speaker']}: {q['text']}" for q in said[max(i - 2, 0) : i] if q["_id"] not in hidden]
        )
        for i, r in enumerate(said)
        if r["_id"] not in gone
    }


def test_a_turn_quotes_its_own_files_turn_though_another_file_says_the_same(conn, tmp_path):
    """a.jsonl's f quotes a.jsonl's t1; b.jsonl's t2 says the same. Once f (or a turn
    g appended to a.jsonl) was stored after t2, a correction of t1 reached neither:
    which turn a quote is of was read from the order stored alone. Ingest quotes a
    file's own turns: the contexts are those of a brain made again from the files."""
    a = jsonl(tmp_path / "a.jsonl", [FOG[1], FOG[2]])
    brain_sql.ingest(conn, [tmp_path])
    jsonl(tmp_path / "b.jsonl", [FOG[0]])
    brain_sql.ingest(conn, [tmp_path])
    jsonl(a, [FOG[1], {**FOG[2], "text": "Boat now."}, FOG[3]])  # f rewritten, g added: both stored after t2
    brain_sql.ingest(conn, [tmp_path])
    jsonl(a, [{**FOG[1], "text": "Sun now."}, {**FOG[2], "text": "Boat now."}, FOG[3]])
    brain_sql.ingest(conn, [tmp_path])
    fresh = brain_sql.connect(tmp_path / "fresh.db")
    brain_sql.ingest(fresh, [a, tmp_path / "b.jsonl"])
    assert contexts(conn) == contexts(fresh)
    assert contexts(conn)[("a.jsonl", "g")] == "Cy\nAnn: Sun now.\nBo: Boat now."
    assert brain_sql.check(conn) == {}


def test_a_corrected_turn_keeps_its_place_among_turns_saying_the_same(conn, tmp_path):
    """A turn corrected, then corrected back, was stored again after the turns below
    it: which of two turns saying the same a quote was of was read from that order,
    so flagging the lower one dropped the quote of the upper one. A document keeps
    its place (its documents row) through its corrections."""
    said = [
        {"_id": "a", "speaker": "Ann", "text": "X."},
        {"_id": "b", "speaker": "Bo", "text": "Y."},
        {"_id": "c", "speaker": "Ann", "text": "X."},
        {"_id": "d", "speaker": "Bo", "text": "Z."},
    ]
    path = jsonl(tmp_path / "a.jsonl", said)
    brain_sql.ingest(conn, [tmp_path])
    for text in ("W.", "X."):
        jsonl(path, [{**said[0], "text": text}, *said[1:]])
        brain_sql.ingest(conn, [tmp_path])
    brain_sql.flag(conn, [i for (i,) in conn.execute("select id from knowledge where external_id = 'c'")])
    assert (quotes(conn, "b"), quotes(conn, "d")) == ("Bo\nAnn: X.", "Bo\nBo: Y.")
    assert brain_sql.check(conn) == {}


def test_check_finds_a_turn_flagged_with_plain_sql_though_another_says_the_same(conn, tmp_path):
    """c says what a says; plain SQL flags c. The turns after c still quote it: check
    named nothing, as if they quoted a, which is not among the turns just before them."""
    said = [("a", "Ann", "X."), ("b", "Bo", "Y."), ("c", "Ann", "X."), ("d", "Bo", "Z."), ("e", "Cy", "W.")]
    jsonl(tmp_path / "a.jsonl", [{"_id": i, "speaker": s, "text": t} for i, s, t in said])
    brain_sql.ingest(conn, [tmp_path])
    with conn:
        without_rules(conn)
        conn.execute("update knowledge set flagged = 1 where external_id = 'c'")
    stale = rows(conn, "select document_id from knowledge where external_id in ('d', 'e') order by 1")
    assert brain_sql.check(conn)["stale_quotes"] == [row[0] for row in stale]
    brain_sql.check(conn, repair=True)
    assert [quotes(conn, i) for i in "bde"] == ["Bo\nAnn: X.", "Bo\nBo: Y.", "Cy\nBo: Z."]


def test_writing_a_turn_reads_its_sessions_turns_not_every_memory(tmp_path):
    """Correcting a turn read every memory's metadata to find its session's turns:
    a full scan, about a second a turn on a million memories. They are read by an
    index of turns by session (m018), which a brain made before it gets: the work
    (SQLite's instructions) of correcting the turns is the same beside 400 other
    memories as beside 4,000."""

    def work(others):
        conn = brain_sql.connect(tmp_path / f"{others}.db")
        brain_sql.ingest(conn, [transcript(tmp_path)])
        conn.execute("drop index idx_knowledge_session")  # a brain made before it
        conn.execute("delete from _sqlite_migrations where name = 'm018_session_index'")
        brain_sql.migrate(conn)
        assert rows(conn, "select name from sqlite_master where name = 'idx_knowledge_session'")
        notes = [{"_id": f"n{i}", "text": f"Note {i}.", "metadata": {"kind": "note"}} for i in range(others)]
        write(tmp_path / "notes.jsonl", "\n".join(json.dumps(n) for n in notes) + "\n")
        assert not brain_sql.ingest(conn, [tmp_path / "notes.jsonl"]).errors
        # the read state catches up with the notes on the next write: done before the measured one
        brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "text": t["text"] + " Yes?"} for t in TURNS])])
        steps = []
        conn.set_progress_handler(lambda: steps.append(1), 100)
        report = brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "text": t["text"] + " Yes!"} for t in TURNS])])
        conn.set_progress_handler(None, 100)
        assert report.documents_updated == len(TURNS)
        assert rows(conn, "select context from knowledge where external_id = 'S1:2'") == [
            (f"Melanie, 8 May 2023\nCaroline: {TURNS[0]['text']} Yes!",)
        ]
        return len(steps)

    few, many = work(400), work(4000)
    assert many < few * 1.1, (few, many)


def test_a_turn_corrected_with_remember_keeps_the_context_of_its_place(conn, tmp_path):
    """An agent remembers a conversation a turn at a time, then corrects one (the
    same _id). Its context was made from the latest turns of the session, quoting
    turns said after it, and the next turn quoted it as the latest. It keeps the
    context of its place: the brain is the one the corrected turns make, one by one."""
    turns = [{**t, "session_id": "chat/1"} for t in TURNS]
    fixed = {**turns[1], "text": "Great! We hiked up to the new lighthouse."}
    later = {"_id": "S1:6", "text": "See you next week then.", "speaker": "Melanie", "session_id": "chat/1"}
    for turn in turns:
        assert not brain_sql.remember(conn, [turn])[0].errors
    for record in (fixed, later):
        assert not brain_sql.remember(conn, [record])[0].errors
    contexts = "select external_id, context from knowledge order by external_id"

    def made_again(name, records):
        brain = brain_sql.connect(tmp_path / name)
        for record in records:
            assert not brain_sql.remember(brain, [record])[0].errors
        return rows(brain, contexts)

    assert rows(conn, contexts) == made_again("again.db", [turns[0], fixed, *turns[2:], later])
    assert dict(rows(conn, contexts))["S1:2"] == f"Melanie\nCaroline: {TURNS[0]['text']}"
    # the whole conversation given again in one call (an edited export), in either order
    edited = [turns[0], fixed, {**turns[2], "text": "I went to a support group."}, *turns[3:], later]
    edited_again = [*edited[:3], {**turns[3], "text": "What did they say?"}, *edited[4:]]
    for name, records, order in (("one.db", edited, edited), ("two.db", edited_again, edited_again[::-1])):
        assert not brain_sql.remember(conn, order)[0].errors
        assert rows(conn, contexts) == made_again(name, records)
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("change", ["inserted", "forgotten"])
def test_a_turn_added_before_stored_ones_is_quoted_by_the_turns_after_it(conn, tmp_path, change):
    """A turn inserted into an ingested transcript, or forgotten while its file
    still holds it and so given again by the next ingest, was added with no turn
    after it quoting it: their contexts (which a digest leaves out) stayed as
    they were. They quote it, as in a brain made again from the file."""
    first = TURNS if change == "forgotten" else TURNS[:1] + TURNS[2:]
    brain_sql.ingest(conn, [transcript(tmp_path, first)])
    if change == "forgotten":
        assert brain_sql.forget(conn, external_ids=["S1:2"])["removed"]["documents"] == 1
    report = brain_sql.ingest(conn, [transcript(tmp_path)])
    assert (report.documents_added, report.documents_unchanged) == (1, 4)
    again = brain_sql.connect(tmp_path / "again.db")
    brain_sql.ingest(again, [transcript(tmp_path)])
    contexts = "select external_id, context from knowledge order by external_id"
    assert rows(conn, contexts) == rows(again, contexts)
    assert dict(rows(conn, contexts))["S1:3"].endswith(f"Melanie: {TURNS[1]['text']}")
    assert brain_sql.check(conn) == {}
    hits = brain_sql.recall(conn, {"q": "hiked to the lighthouse with the kids, then the support group", "k": 5})
    assert "S1:3" in [hit["external_id"] for hit in hits["hits"]]


def test_one_call_correcting_turns_and_adding_turns_gives_each_the_context_of_its_place(conn, tmp_path):
    """Corrections and new turns in one remember call, in any order: a new turn
    quotes the latest turns as the call corrects them (it quoted older ones,
    skipping a corrected one), and a turn corrected after a later turn that
    quotes it no longer fails with "the brain file is damaged" (the later turn's
    vector, requoted, was inserted twice). The brain is the one the final turns
    make, one by one."""

    def turn(number, text):
        return {"_id": f"t{number}", "text": text, "speaker": "Ann" if number % 2 else "Bo", "session_id": "s"}

    said = {n: f"Said {n}." for n in range(1, 6)}
    for n in said:
        assert not brain_sql.remember(conn, [turn(n, said[n])])[0].errors
    calls = [
        [(5, "Said 5, fixed."), (6, "Said 6.")],
        [(7, "Said 7."), (4, "Said 4, fixed.")],
        [(5, "Five."), (4, "Four.")],
    ]
    for call in calls:
        said.update(call)
        report, _ = brain_sql.remember(conn, [turn(n, text) for n, text in call])
        assert not report.errors, report.errors
    again = brain_sql.connect(tmp_path / "again.db")
    for n in sorted(said):
        assert not brain_sql.remember(again, [turn(n, said[n])])[0].errors
    contexts = "select external_id, context from knowledge order by external_id"
    assert rows(conn, contexts) == rows(again, contexts)
    assert dict(rows(conn, contexts))["t6"] == "Bo\nBo: Four.\nAnn: Five."
    assert brain_sql.check(conn) == {}


def test_rewriting_every_turn_of_a_session_grows_with_the_session_not_its_square(tmp_path):
    """A file rewriting every turn of one session (an edited transcript) read the
    whole session for each turn it wrote: quadratic, 45 s for 2,000 turns. A run
    of writes now reads a session once and keeps it as it writes (SessionTurns):
    the work (SQLite's instructions) for twice the turns is about twice as much."""

    def work(turns, run):
        conn = brain_sql.connect(tmp_path / f"{turns}-{run}.db")
        path = tmp_path / f"{turns}-{run}.jsonl"

        def said(words):
            lines = [
                {"_id": f"t{i}", "speaker": ["Ann", "Bo"][i % 2], "text": f"Turn {i} about {words} {i % 7}."}
                for i in range(turns)
            ]
            jsonl(path, lines)

        said("the boat")
        brain_sql.ingest(conn, [path])
        said("the fog")
        steps = []
        conn.set_progress_handler(lambda: steps.append(1), 1000)
        report = brain_sql.ingest(conn, [path])
        conn.set_progress_handler(None, 1000)
        assert report.documents_updated == turns
        assert dict(rows(conn, "select external_id, context from knowledge"))["t9"] == (
            "Bo\nBo: Turn 7 about the fog 0.\nAnn: Turn 8 about the fog 1."
        )
        assert brain_sql.check(conn) == {}
        return len(steps)

    # the least of two runs: a loaded machine adds work (up to 12% seen) that is not the write's
    few, many = (min(work(turns, run) for run in (1, 2)) for turns in (100, 200))
    assert many < few * 2.4, (few, many)


WORDS = ["Fog.", "Boat.", "Ok.", "Fog again.", "Sun.", "Hi\nFog.", "Hi\nBoat."]


@pytest.mark.parametrize("seed", range(30))
def test_a_run_keeping_its_sessions_writes_what_reading_them_each_time_writes(tmp_path, monkeypatch, seed):
    """What a run keeps of a session it rewrites (SessionTurns) is what reading it
    again would give: random edits of a transcript (turns saying the same,
    inserted, removed, moved to another session, several lines long, corrected
    with remember, flagged, forgotten), ingested with the kept sessions and with
    every read made afresh, give the same brain."""
    import random

    from brain_sql import conversation

    def run(name, keep):
        if not keep:
            monkeypatch.setattr(conversation.SessionTurns, "session", lambda self, c, *w: conversation._Session(c, *w))
        rng = random.Random(seed)
        (tmp_path / name).mkdir()
        conn = brain_sql.connect(tmp_path / name / "brain.db")
        path = tmp_path / name / "chat.jsonl"
        said = [{"_id": f"t{i}", "speaker": rng.choice("AB"), "text": rng.choice(WORDS)} for i in range(12)]
        made = 12
        for _ in range(8):
            for _ in range(rng.randint(2, 10)):
                step, at = rng.choice(["edit", "edit", "insert", "remove", "move"]), rng.randrange(len(said))
                if step == "move":
                    said[at] = {**said[at], "session_id": rng.choice(["s1", "s2"])}
                elif step == "edit":
                    said[at] = {**said[at], "text": rng.choice(WORDS + [f"New {made}."])}
                elif step == "insert":
                    said.insert(at, {"_id": f"t{made}", "speaker": rng.choice("AB"), "text": rng.choice(WORDS)})
                elif len(said) > 3:
                    said.pop(at)
                made += 1
            jsonl(path, said)
            try:
                report = brain_sql.ingest(conn, [path])
            except brain_sql.PruneRefused:  # its one stored memory given elsewhere by remember: as written alike
                report = brain_sql.ingest(conn, [path], prune_all=True)
            assert not report.errors, report.errors
            turn = rng.choice(said)
            action = rng.choice(["remember", "flag", "forget", "none"])
            if action == "remember":  # a few turns corrected in one call
                records = [{"session_id": "s1", **t, "text": rng.choice(WORDS)} for t in rng.sample(said, 3)]
                assert not remember(conn, records)[0].errors
            elif action in ("flag", "forget"):
                ids = [i for (i,) in conn.execute("select id from knowledge where external_id = ?", [turn["_id"]])]
                brain_sql.flag(conn, ids) if action == "flag" else brain_sql.forget(conn, ids=ids)
        stored = "select external_id, content, context, flagged from knowledge order by external_id, id"
        return rows(conn, stored), json.loads(json.dumps(brain_sql.check(conn)).replace(str(tmp_path / name), ""))

    kept = run("kept", True)
    assert kept == run("read", False)


def test_correcting_a_turn_in_each_of_many_sessions_grows_with_their_number(conn):
    """One remember call correcting a turn in each of many sessions: the sessions
    a run keeps are brought up to date only where a written turn was or is now,
    not all of them at each write (the work grew with the square of their number)."""

    def work(sessions):
        def turn(s, i, text):
            return {"_id": f"{sessions}-{s}-{i}", "text": text, "speaker": "AB"[i % 2], "session_id": f"{sessions}/{s}"}

        said = [turn(s, i, f"Turn {i} of {s}.") for s in range(sessions) for i in range(3)]
        assert not remember(conn, said)[0].errors
        steps = []
        conn.set_progress_handler(lambda: steps.append(1), 1000)
        report, _ = remember(conn, [turn(s, 1, f"Turn 1 of {s}, corrected.") for s in range(sessions)])
        conn.set_progress_handler(None, 1000)
        assert not report.errors and report.documents_updated == sessions
        assert dict(rows(conn, "select external_id, context from knowledge"))[f"{sessions}-7-2"] == (
            "A\nA: Turn 0 of 7.\nB: Turn 1 of 7, corrected."
        )
        return len(steps)

    few, many = work(60), work(120)
    assert many < few * 2.4, (few, many)
    assert brain_sql.check(conn) == {}


def test_a_turn_given_with_an_offset_is_said_on_its_own_day_through_correction_check_and_export(conn, tmp_path):
    """A turn said at 20:00 in California or at 00:30 in India is said on the day its
    record names, not on the day UTC has (observed_at is still kept in UTC): in its
    title, its context and the days its relative phrases name; a correction giving no
    time keeps that day, check finds the brain whole, and an export ingested again
    says the same days."""
    said = [
        {"_id": "T:1", "text": "We hiked yesterday.", "speaker": "Ana", "observed_at": "2023-05-08T20:00:00-07:00"},
        {"_id": "T:2", "text": "Last year I did too.", "speaker": "Bo", "observed_at": "2023-01-01T00:30:00+05:30"},
    ]
    lines = [json.dumps({**t, "session_id": f"chat/{t['_id']}"}) for t in said]
    brain_sql.ingest(conn, [write(tmp_path / "chat.jsonl", "\n".join(lines) + "\n")])
    expected = {
        "T:1": ("Ana, 8 May 2023", ["Ana, 8 May 2023", "yesterday: 7 May 2023"], "2023-05-09 03:00:00"),
        "T:2": ("Bo, 1 January 2023", ["Bo, 1 January 2023", "last year: 2022"], "2022-12-31 19:00:00"),
    }

    def days(conn):
        return {
            external_id: (title, context.splitlines(), observed_at)
            for external_id, title, context, observed_at in rows(
                conn, "select external_id, title, context, observed_at from knowledge"
            )
        }

    assert days(conn) == expected
    assert brain_sql.check(conn) == {}
    remember(
        conn, [{"_id": "T:1", "text": "We hiked yesterday, up the hill.", "speaker": "Ana", "session_id": "chat/T:1"}]
    )
    assert days(conn)["T:1"] == expected["T:1"]
    assert brain_sql.check(conn) == {}
    exported = write(tmp_path / "export.jsonl", "".join(brain_sql.export(conn)))
    copy = brain_sql.connect(tmp_path / "copy.db")
    assert not brain_sql.ingest(copy, [exported]).errors
    assert days(copy) == days(conn)
    # a day the context says that observed_at can be in no time zone: check restates the UTC day
    conn.execute("update knowledge set observed_at = '2023-05-12 03:00:00' where external_id = 'T:1'")
    brain_sql.check(conn, repair=True)
    assert days(conn)["T:1"][1] == ["Ana, 12 May 2023", "yesterday: 11 May 2023"]
    # a day no calendar has, written with plain SQL: repair restates observed_at's day, as before
    conn.execute("update knowledge set context = replace(context, '12 May', '31 February') where external_id = 'T:1'")
    brain_sql.check(conn, repair=True)
    assert days(conn)["T:1"][1] == ["Ana, 12 May 2023", "yesterday: 11 May 2023"]
    # the file given again with another offset, the same instant: the turn is said on that day (review 69)
    said[1] = {**said[1], "observed_at": "2022-12-31T21:00:00+02:00"}
    lines = [json.dumps({**t, "session_id": f"chat/{t['_id']}"}) for t in said]
    brain_sql.ingest(conn, [write(tmp_path / "chat.jsonl", "\n".join(lines) + "\n")])
    assert days(conn)["T:2"][:2] == ("Bo, 31 December 2022", ["Bo, 31 December 2022", "last year: 2021"])
    # at the calendar's ends: no day past them is read, nothing fails (review 69)
    remember(conn, [{"_id": "E:1", "text": "See you tomorrow.", "speaker": "Cy", "session_id": "end",
                     "observed_at": "9999-12-30T23:30:00-01:00"}])  # fmt: skip
    assert days(conn)["E:1"][:2] == ("Cy, 30 December 9999", ["Cy, 30 December 9999", "tomorrow: 31 December 9999"])
    for moved in ("9999-12-31 23:00:00", "0001-01-01 00:30:00"):
        conn.execute("update knowledge set observed_at = ? where external_id = 'E:1'", [moved])
        assert list(brain_sql.check(conn)) == ["stale_own_lines"]
        assert any('"_id": "E:1"' in line for line in brain_sql.export(conn))


def test_a_turn_without_an_id_said_again_is_another_turn_in_a_file_or_a_call(conn, tmp_path):
    """A chat export without ids where Bob says "ok" twice stores both (review 68: the
    second was taken for a repeat of the first and dropped without a word), in a file
    ingested again as it was and in a remember call sent again (each finds the same
    turns, and the call is told each one's ids). Remembered a turn a call, the second
    "ok" is taken for the first sent again, a retried call (review 69): such turns
    need their `_id`s."""
    said = [("Ann", "Shall we ship on Friday?"), ("Bob", "ok"), ("Ann", "And skip the review?"), ("Bob", "ok")]
    turns = [{"speaker": who, "text": text, "session_id": "s1"} for who, text in said]
    path = write(tmp_path / "chat.jsonl", "".join(json.dumps(t) + "\n" for t in turns))

    def contents(conn):
        return [row[0] for row in rows(conn, "select content from knowledge order by id")]

    brain_sql.ingest(conn, [path])
    assert contents(conn) == [text for _, text in said]
    assert brain_sql.ingest(conn, [path]).documents_unchanged == 4  # the same file again: the same turns
    assert contents(conn) == [text for _, text in said]
    context = conn.execute("select context from knowledge where id = 4").fetchone()[0]
    assert context.splitlines()[1:] == ["Bob: ok", "Ann: And skip the review?"]
    called = brain_sql.connect(tmp_path / "call.db")
    report, ids = remember(called, turns)
    assert contents(called) == [text for _, text in said] and len({i for each in ids for i in each}) == 4
    assert ids == [[i] for i in range(1, 5)]
    report, again = remember(called, turns)  # the call sent again
    assert again == ids and report.documents_unchanged == 4 and len(contents(called)) == 4
    one_by_one = brain_sql.connect(tmp_path / "calls.db")
    assert [remember(one_by_one, [turn])[1][0] for turn in turns] == [[1], [2], [3], [2]]
    assert contents(one_by_one) == [text for _, text in said[:3]]


def test_a_context_plain_sql_fills_with_quotes_is_repaired_in_one_rewrite(tmp_path):
    """Plain SQL appends hundreds of quotes to T3's context: of T1, which it
    quotes once already (a turn is quoted once), and of turns none says. check
    names it, and repair drops them all in one rewrite of the context, each
    quote's words found once (check and repair stay linear in its length)."""
    chat = [("T1", "A", "a"), ("T2", "A", "a\nA: a"), ("T3", "B", "b")]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, [{"_id": i, "speaker": s, "text": t} for i, s, t in chat])])
    fresh = quotes(conn, "T3")
    filled = fresh + "".join(f"\nA: a\nC: gone {n}" for n in range(300))
    conn.execute("update knowledge set context = ? where external_id = 'T3'", [filled])
    conn.commit()
    t3 = conn.execute("select document_id from knowledge where external_id = 'T3'").fetchone()[0]
    assert brain_sql.check(conn) == {"stale_quotes": [t3]}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "T3") == fresh
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("change", ["delete", "update"])
def test_a_turn_plain_sql_changed_is_found_where_other_turns_words_could_hold_its_quote(tmp_path, change):
    """Review 81: T5 quotes T3 ("a / Bob: b") and T4 ("c"); T2 says "b / Carl: c".
    Plain SQL deletes or changes T4: check names T5's quote of it, though T1 then T2
    would cut those lines whole (a shorter cut is taken only for the quoting turn's
    own words), repair drops or restates it, and forgetting T2 later leaves T3's quote."""
    said = [("T1", "Ann", "a"), ("T2", "Bob", "b\nCarl: c"), ("T3", "Ann", "a\nBob: b"), ("T4", "Carl", "c")]
    said.append(("T5", "Dan", "d"))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, [{"_id": i, "speaker": s, "text": t} for i, s, t in said])])
    assert quotes(conn, "T5").splitlines()[1:] == ["Ann: a", "Bob: b", "Carl: c"]
    sql = {"delete": "delete from knowledge", "update": "update knowledge set content = 'zz'"}[change]
    conn.execute(f"{sql} where external_id = 'T4'")
    conn.commit()
    t5 = conn.execute("select document_id from knowledge where external_id = 'T5'").fetchone()[0]
    assert t5 in brain_sql.check(conn)["stale_quotes"]
    brain_sql.check(conn, repair=True)
    kept = ["Ann: a", "Bob: b"] + {"delete": [], "update": ["Carl: zz"]}[change]
    assert quotes(conn, "T5").splitlines()[1:] == kept
    brain_sql.forget(conn, external_ids=["T2"])
    assert quotes(conn, "T5").splitlines()[1:] == kept


FLAG, DELETE, UPDATE = (
    "update knowledge set flagged = 1",
    "delete from knowledge",
    "update knowledge set content = 'zz'",
)


@pytest.mark.parametrize(
    "remembered, change, now",
    [
        ("after", FLAG, ["Ann: a"]),
        ("after", DELETE, ["Ann: a"]),
        ("after", UPDATE, ["Ann: a", "Bob: zz"]),
        ("before", FLAG, ["Ann: a"]),
        ("before", UPDATE, ["Ann: a", "Bob: zz"]),
    ],
)
def test_a_remembered_turn_pasting_a_window_is_not_read_as_a_turn_of_its_file(tmp_path, remembered, change, now):
    """Reviews 81 and 82: R, remembered (no file, its own _id), says T1's and T2's
    words joined; T3 quotes T1 and T2. Plain SQL flags, deletes or changes T2:
    check names T3's quote of it (R is no turn of T3's file remembered again, nor
    one of the session's turns just before T3), and repair drops or rewrites that
    quote alone. (R stored before T1 and T2 deleted: R is then just before T3, as
    an export's copy would quote it, and check reads the lines as R's.)"""
    chat = [{"_id": "T1", "speaker": "Ann", "text": "a"}, {"_id": "T2", "speaker": "Bob", "text": "b"}]
    chat.append({"_id": "T3", "speaker": "Carl", "text": "c"})
    conn = brain_sql.connect(tmp_path / "brain.db")
    pasting = {"_id": "R", "speaker": "Ann", "text": "a\nBob: b", "session_id": "chat/1"}
    pasting["observed_at"] = "2023-05-08T13:56:00" if remembered == "after" else "2023-05-08T13:55:00"
    if remembered == "before":
        assert not remember(conn, [pasting])[0].errors
    brain_sql.ingest(conn, [transcript(tmp_path, chat)])
    if remembered == "after":
        assert not remember(conn, [pasting])[0].errors
    assert brain_sql.check(conn) == {}
    conn.execute(f"{change} where external_id = 'T2'")
    conn.commit()
    t3 = conn.execute("select document_id from knowledge where external_id = 'T3'").fetchone()[0]
    assert t3 in brain_sql.check(conn)["stale_quotes"]
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "T3").splitlines()[1:] == now
    assert "stale_quotes" not in brain_sql.check(conn)


@pytest.mark.parametrize("how", [None, "forget", "flag", "correct"])
@pytest.mark.parametrize("changed", ["T", "X", "E"])
def test_a_turn_inserted_later_is_read_in_a_context_whose_longest_cut_leaves_a_run(tmp_path, how, changed):
    """Review 82: X ("b / Carl: c") is inserted into the file later, before Q, so Q
    quotes T ("a") and X, not its window as stored. E, far back, says "a / Bob: b":
    the longest cut reads Q's lines as E and a run no turn says. Q's context is
    read as T and X, turns of its file, X stored after Q: check names nothing on
    the fresh brain, and changing T or X changes its quote alone, E none."""
    said = [("E", "Ann", "a\nBob: b"), ("F", "Finn", "f"), ("T", "Ann", "a"), ("X", "Bob", "b\nCarl: c")]
    records = [{"_id": i, "speaker": s, "text": t} for i, s, t in said + [("Q", "Quinn", "q")]]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, [r for r in records if r["_id"] != "X"])])
    brain_sql.ingest(conn, [transcript(tmp_path, records)])
    assert quotes(conn, "Q").splitlines()[1:] == ["Ann: a", "Bob: b", "Carl: c"]
    if how is None:
        assert brain_sql.check(conn) == {}
        brain_sql.check(conn, repair=True)
        assert quotes(conn, "Q").splitlines()[1:] == ["Ann: a", "Bob: b", "Carl: c"]
        return
    _changed(conn, changed, how)
    gone = {"forget": [], "flag": [], "correct": [{"T": "Ann: zz", "X": "Bob: zz"}.get(changed)]}[how]
    now = {"T": gone + ["Bob: b", "Carl: c"], "X": ["Ann: a"] + gone, "E": ["Ann: a", "Bob: b", "Carl: c"]}
    assert quotes(conn, "Q").splitlines()[1:] == now[changed]
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("how", [None, "forget", "flag"])
def test_a_turn_plain_sql_gave_another_path_is_still_quoted_as_its_file_s(tmp_path, how):
    """Review 85: A0 and A1 (file A), B0 and B1 (file B), then A again with A2 and A3,
    in one session. Plain SQL gives A1 another source path: its document id still
    names file A, so A2's and A3's quotes of it are still of it. Check names nothing;
    forgetting or flagging A1 drops those quotes."""
    said = [("A0", "Ann", "a0"), ("A1", "Bob", "b1"), ("A2", "Ann", "a2"), ("A3", "Bob", "b3")]
    a = [{"_id": i, "speaker": s, "text": t} for i, s, t in said]
    b = [{"_id": "B0", "speaker": "Sue", "text": "s0"}, {"_id": "B1", "speaker": "Tim", "text": "t1"}]
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [transcript(tmp_path, a[:2])])
    brain_sql.ingest(
        conn, [write(tmp_path / "b.jsonl", "".join(json.dumps({**r, "session_id": "chat/1"}) + "\n" for r in b))]
    )
    brain_sql.ingest(conn, [transcript(tmp_path, a)])
    assert [quotes(conn, t).splitlines()[1:] for t in ("A2", "A3")] == [["Ann: a0", "Bob: b1"], ["Bob: b1", "Ann: a2"]]
    conn.execute("update knowledge set source_path = source_path || '.moved' where external_id = 'A1'")
    conn.commit()
    assert brain_sql.check(conn) == {}
    a1 = [r for (r,) in conn.execute("select id from knowledge where external_id = 'A1'")]
    if how == "forget":
        brain_sql.forget(conn, external_ids=["A1"])
    elif how == "flag":
        brain_sql.flag(conn, a1)
    now = [["Ann: a0", "Bob: b1"], ["Bob: b1", "Ann: a2"]] if how is None else [["Ann: a0"], ["Ann: a2"]]
    assert [quotes(conn, t).splitlines()[1:] for t in ("A2", "A3")] == now
    assert brain_sql.check(conn) == {}
