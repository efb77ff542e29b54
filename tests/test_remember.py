"""Remember through the library: the same text in another scope is another memory,
a repeat is stored once, and a batch is written with few full-text index segments.
`sqlite-utils brain remember` is tested in test_cli_remember.py; one transaction
whatever its size, in test_writers.py."""

import json

import pytest

import brain_sql
from brain_sql import pipeline, writer
from brain_sql.connection import sqlite3
from brain_sql.wording import shown

from .conftest import rows


def test_same_text_in_another_scope_is_another_memory(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    for scope in ("/acme", "/globex"):
        record = {"title": "Wifi", "text": "The wifi password rotates.", "scope": scope}
        report, ids = brain_sql.remember(conn, [record])
        assert not report.errors and ids[0]
    assert rows(conn, "select scope from knowledge order by scope") == [("/acme",), ("/globex",)]
    record = {"title": "Door", "text": "The door code changes weekly."}
    report, ids = brain_sql.remember(conn, [record, record])  # a repeat is stored once and answered with its ids
    assert not report.errors and ids[0] and ids[0] == ids[1]


def _fts_segments_written(conn):
    """FTS5's count of the index segments it has ever written: the third varint of
    its structure record (knowledge_fts_data row 10), after a 4-byte cookie and the
    numbers of levels and of segments."""
    block, numbers, value = conn.execute("select block from knowledge_fts_data where id = 10").fetchone()[0][4:], [], 0
    for byte in block:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            numbers.append(value)
            value = 0
            if len(numbers) == 3:
                return numbers[2]


@pytest.mark.parametrize("parameters", [None, 100])
def test_a_batch_of_new_documents_writes_few_index_segments(tmp_path, monkeypatch, parameters):
    """FTS5 writes out what it holds at every statement that may roll back alone;
    one such statement a memory made a segment a memory, to merge again later.
    (An SQLite taking fewer parameters a statement takes more statements.)"""
    if parameters:
        monkeypatch.setattr(writer, "max_variables", lambda: parameters)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    records = [{"_id": f"r{i}", "title": f"Note {i}", "text": f"Memory {i}."} for i in range(300)]
    report, ids = brain_sql.remember(conn, records)
    assert not report.errors and [i for [i] in ids] == list(range(1, 301))  # the ids given one by one
    assert parameters or _fts_segments_written(conn) < 30
    assert rows(conn, "select rowid from knowledge_fts where knowledge_fts match 'memory' order by rowid") == [
        (i,) for i in range(1, 301)
    ]


def _prepared_inserts(conn):
    """The tables of the inserts `conn` prepares from now on: SQLite asks the
    authorizer about a statement as it prepares it (again when it was expired)."""
    prepared = []

    def authorize(action, table, *_):
        if action == sqlite3.SQLITE_INSERT:
            prepared.append(table)
        return sqlite3.SQLITE_OK

    conn.set_authorizer(authorize)
    return prepared


def test_remember_after_remember_prepares_its_statements_once(tmp_path):
    """Each remember looks for migrations to apply first; that looking no longer
    runs sqlite-utils' plugin hooks (registering every SQL function again) nor sets
    recursive triggers again, each of which expired every prepared statement."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    prepared = _prepared_inserts(conn)
    for i in range(20):
        report, _ = brain_sql.remember(conn, [{"_id": f"r{i}", "title": f"Note {i}", "text": f"Memory {i}."}])
        assert not report.errors
    assert prepared.count("documents") == 1 and prepared.count("entities") == 1, prepared
    assert conn.execute("pragma recursive_triggers").fetchone() == (1,)  # writes run with them, as they always have


def test_batches_of_any_size_write_chunks_through_a_few_statements(tmp_path):
    """The statement that inserts new chunks has one of a few shapes, however many
    there are: a prepared statement of 500 rows holds about 1.7 MB, and a
    connection keeps what it prepared (one of each size ingest met, hundreds over
    a long run). SQLite asks the authorizer about a statement as it prepares it."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    prepared = _prepared_inserts(conn)
    for size in range(1, 41):
        records = [{"_id": f"r{size}-{i}", "title": f"Note {size}-{i}", "text": f"Memory {i}."} for i in range(size)]
        report, ids = brain_sql.remember(conn, records)
        assert not report.errors and len(ids) == size
    assert prepared.count("knowledge") <= 4
    assert rows(conn, "select count(*) from knowledge") == [(sum(range(1, 41)),)]


def test_a_scope_imitated_first_does_not_block_the_ascii_scope(tmp_path):
    """/ɑcme/support (Latin alpha) remembered first: /acme/support, the scope it
    imitates, is still written; the imitation, remembered after it, is refused."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    alpha = "/\u0251cme/support"
    for text, scope in (("From a contractor.", alpha), ("Restart the widget.", "/acme/support")):
        report, _ = brain_sql.remember(conn, [{"text": text, "scope": scope}])
        assert not report.errors, report.errors
    report, _ = brain_sql.remember(conn, [{"text": "Again.", "scope": "/\u0251cme/billing"}])
    assert not report.errors  # /ɑcme is a scope the brain holds: its children are its own
    other = tmp_path / "other.db"
    report, _ = brain_sql.remember(brain_sql.connect(other), [{"text": "Restart.", "scope": "/acme/support"}])
    report, _ = brain_sql.remember(brain_sql.connect(other), [{"text": "x", "scope": alpha}])
    assert [e.message for e in report.errors] == [
        'record 1: scope "/\u0251cme/support" reads like "/acme", a scope this brain holds: '
        "U+0251 LATIN SMALL LETTER ALPHA read as its characters; it would be a separate scope that looks like "
        'another: write "/acme" where that is meant, or another name'
    ]


def test_the_brains_scopes_are_read_once_then_followed_and_not_for_an_ascii_scope(tmp_path, monkeypatch):
    """Remember checks a scope outside ASCII against the brain's scopes: read whole
    once (kept per file, whichever connection asks), never for a plain-ASCII
    scope; what is written after is followed from the change log, so a twin of a
    scope written since is refused and a twin of a scope forgotten since is not."""
    reads = []
    stored_scopes = pipeline.stored_scopes
    monkeypatch.setattr(pipeline, "stored_scopes", lambda conn: reads.append(1) or stored_scopes(conn))
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)

    def remember(scope, into=conn):
        report, _ = brain_sql.remember(into, [{"_id": scope, "text": f"Notes of {scope}.", "scope": scope}])
        return [e.message for e in report.errors]

    assert remember("/ace") == [] and remember("/team/billing") == [] and reads == []
    cyrillic = "/\u0430\u0441\u0435"
    assert 'reads like "/ace"' in remember(cyrillic)[0] and len(reads) == 1
    assert 'reads like "/ace"' in remember(cyrillic + "/x")[0]
    assert 'reads like "/ace"' in remember(cyrillic, brain_sql.connect(path))[0]
    assert remember("/\u043c\u043e\u0441\u043a\u0432\u0430") == [] and remember("/cop") == []
    assert 'reads like "/cop"' in remember("/\u0441\u043e\u0440")[0]  # Cyrillic сор: /cop, written since
    brain_sql.forget(conn, external_ids=["/ace"])
    assert remember(cyrillic) == [] and reads == [1]
    assert rows(conn, "select scope from knowledge order by scope") == [
        ("/cop",),
        ("/team/billing",),
        ("/\u0430\u0441\u0435",),
        ("/\u043c\u043e\u0441\u043a\u0432\u0430",),
    ]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"speaker": "Ann", "session_id": [1]}, "session_id must be text or a whole number"),
        ({"speaker": {}, "session_id": "s1"}, "speaker must be text or a whole number"),
        ({"role": True, "thread_id": "t1"}, "role must be text or a whole number"),
        ({"speaker": "Ann", "conversation_id": 1.5}, "conversation_id must be text or a whole number"),
    ],
)
def test_a_turn_whose_speaker_or_session_is_not_a_name_is_refused_by_name(tmp_path, record, message):
    """A speaker or session that is a list, an object, true or 1.5 names no one: the
    record is refused naming the field, not stored as a plain memory holding them."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    report, ids = brain_sql.remember(conn, [{"text": "Hello there.", **record}])
    assert [e.message for e in report.errors] == [f"record 1: {message}, not {shown(next(iter(bad(record))))}"]
    assert ids == [] and rows(conn, "select count(*) from knowledge") == [(0,)]


def bad(record):
    return [v for v in record.values() if not isinstance(v, str)]


def test_whole_numbers_name_a_speaker_a_session_an_id_a_title_and_what_is_superseded(tmp_path):
    """A whole number is taken as its digits wherever a record names something, as
    an `_id` always was (and forget takes it so): the turn's speaker and session, the
    title, the `_id` a record supersedes."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    records = [
        {"_id": 7, "title": 2024, "text": "The plan for the year.", "speaker": 5, "session_id": 9},
        {"_id": 8, "text": "The plan changed.", "supersedes": 7},
    ]
    report, _ = brain_sql.remember(conn, records)
    assert not report.errors
    assert rows(conn, "select external_id, title, supersedes from knowledge order by id") == [
        ("7", "2024", None),
        ("8", None, "7"),
    ]
    assert rows(conn, "select superseded_by is not null from knowledge order by id") == [(1,), (0,)]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"title": 1.5}, "'title' must be text or a whole number, not 1.5"),
        ({"supersedes": 7.0}, "supersedes must be text or a whole number (the _id of a record), not 7.0"),
        ({"supersedes": True}, "supersedes must be text or a whole number (the _id of a record), not true"),
        # review 95: stored as Python wrote it ("['x', {'y': 1}]"), which no JSON reader reads back
        (
            {"entities": [{"name": "Qq1", "type": ["x", {"y": 1}]}]},
            "an entity's 'type' must be text, as a relation's to_type is, not [\"x\", {\"y\": 1}]",
        ),
        (
            {"entities": [{"name": "Qq2", "type": 5}]},
            "an entity's 'type' must be text, as a relation's to_type is, not 5",
        ),
    ],
)
def test_a_title_or_supersedes_that_is_not_text_or_a_whole_number_is_refused(tmp_path, record, message):
    """1.5 as a title, 7.0 as the _id superseded: stored as text they would be a
    title nobody wrote and an _id no record has ("7.0"); refused by name instead."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    report, ids = brain_sql.remember(conn, [{"text": "Some text.", **record}])
    assert [e.message for e in report.errors] == [f"record 1: {message}"]
    assert rows(conn, "select count(*) from knowledge") == [(0,)]


def test_an_earlier_version_of_no_record_is_refused_by_name(tmp_path):
    """A record placed as history (`_version_of`) of a record neither stored nor in
    the same call was stored as history of nothing, which check then named. Refused
    now; with its record in the same call, or stored before, it goes in."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    old = {"_document": "remember#role@2024", "_version_of": "remember#role", "_id": "role", "text": "Alice was QA"}
    report, _ = brain_sql.remember(conn, [old])
    assert [str(e) for e in report.errors] == [
        "remember: record 1: '_version_of' names no current record: \"remember#role\" (it takes the record's "
        "document id, as '_document' gives it and export writes it; give that record in the same call, or "
        "remember it first)"
    ]
    assert rows(conn, "select count(*) from knowledge") == [(0,)]
    report, _ = brain_sql.remember(conn, [old, {"_id": "role", "text": "Alice leads QA"}])
    assert not report.errors and brain_sql.check(conn) == {}
    report, _ = brain_sql.remember(conn, [{**old, "_document": "remember#role@2023", "text": "Alice was new"}])
    assert not report.errors and rows(conn, "select count(*) from knowledge") == [(3,)]


def test_history_of_itself_or_of_another_version_is_refused_and_ids_answer_each_record(tmp_path):
    """A `_version_of` naming the record's own `_document`, or two naming each other,
    was history of nothing that check did not name; and a call holding a record and
    its history answered the record with the history's memory ids."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    for records in (
        [{"_document": "x", "_version_of": "x", "text": "self history"}],
        [{"_document": "a", "_version_of": "b", "text": "A"}, {"_document": "b", "_version_of": "a", "text": "B"}],
    ):
        report, _ = brain_sql.remember(conn, records)
        assert report.errors and all("names no current record" in e.message for e in report.errors)
    assert rows(conn, "select count(*) from knowledge") == [(0,)]
    report, ids = brain_sql.remember(
        conn, [{"_document": "a@1", "_version_of": "a", "text": "old"}, {"_document": "a", "text": "current"}]
    )
    assert not report.errors
    assert [rows(conn, "select content from knowledge where id = ?", [i[0]]) for i in ids] == [
        [("old",)],
        [("current",)],
    ]


def test_a_record_with_history_of_its_own_cannot_become_history(tmp_path):
    """Placed as an earlier version of another record, a record that has earlier
    versions left them history of a history, which check did not name."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    records = [{"_document": "a@1", "_version_of": "a", "text": "old"}, {"_document": "a", "text": "cur"}]
    assert not brain_sql.remember(conn, records + [{"_id": "k", "text": "k now"}])[0].errors
    report, _ = brain_sql.remember(conn, [{"_document": "a", "_version_of": "remember#k", "text": "cur2"}])
    assert [e.message for e in report.errors] == [
        'record 1: "a" has earlier versions of its own: it cannot become an earlier version of another record'
    ]
    assert brain_sql.check(conn) == {}


def test_two_records_giving_one_earlier_version_are_refused_by_name(tmp_path):
    """A placed history version and an `_id` record whose valid_from places it at
    that same version, in one call, were stored as two documents under one id
    (check: incomplete_documents), the second answered with the current record's
    memories. The second is refused by name now, and nothing is written."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.remember(conn, [{"_id": "k", "text": "current 2026", "valid_from": "2026-01-01"}])[0].errors
    placed = {"_document": "remember#k@2025-01-01 00:00:00", "_version_of": "remember#k", "text": "placed A"}
    record = {"_id": "k", "text": "earlier B", "valid_from": "2025-01-01"}
    for records, number in (([{**placed, "valid_from": "2025-01-01"}, record], 2), ([record, placed], 2)):
        report, ids = brain_sql.remember(conn, records)
        assert [e.message for e in report.errors] == [
            f"record {number}: it is the earlier version "
            '"remember#k@2025-01-01 00:00:00" of "remember#k" that an earlier record also gives: give it once'
        ]
        assert ids == [] and rows(conn, "select count(*) from knowledge") == [(1,)]
    same = [placed, {**placed, "_version_of": placed["_document"], "text": "placed C"}]  # one _document twice
    assert [e.message for e in brain_sql.remember(conn, same)[0].errors][0] == (
        'record 2: repeats the id of an earlier record with other content: "remember#k@2025-01-01 00:00:00"'
    )
    report, ids = brain_sql.remember(conn, [record])  # alone, it is that earlier version
    assert not report.errors and brain_sql.check(conn) == {}
    assert rows(conn, "select document_id, version_of, content from knowledge where id = ?", [ids[0][0]]) == [
        ("remember#k@2025-01-01 00:00:00", "remember#k", "earlier B")
    ]


def test_an_unchanged_record_given_a_version_of_becomes_that_history(tmp_path):
    """A `_version_of` given to a stored record whose text did not change was not
    applied, with no error: the record stayed current."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.remember(conn, [{"_document": "a", "text": "cur"}, {"_id": "k", "text": "k now"}])[0].errors
    report, ids = brain_sql.remember(conn, [{"_document": "a", "_version_of": "remember#k", "text": "cur"}])
    assert not report.errors and report.documents_updated == 1
    assert rows(conn, "select version_of from knowledge where document_id = 'a'") == [("remember#k",)]
    assert brain_sql.check(conn) == {}
    again, _ = brain_sql.remember(conn, [{"_document": "a", "_version_of": "remember#k", "text": "cur"}])
    assert not again.errors and again.documents_unchanged == 1


def test_a_correction_keeps_when_the_memory_was_stored_and_observed(tmp_path):
    """docs/ingest.md: a rewritten record keeps created_at, and observed_at unless it
    gives one, in a chunk whose text changed (a new row) as in one kept (review 48:
    the new row took the time of the correction)."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.remember(
        conn, [{"_id": "x", "text": "Deploys happen on Tuesdays.", "observed_at": "2023-05-08T13:56:00"}]
    )
    with conn:  # as if stored a while ago
        conn.execute("update knowledge set created_at = '2024-01-02 03:04:05'")
    brain_sql.remember(conn, [{"_id": "x", "text": "Deploys happen on Tuesdays and Fridays."}])
    assert rows(conn, "select content, observed_at, created_at from knowledge") == [
        ("Deploys happen on Tuesdays and Fridays.", "2023-05-08 13:56:00", "2024-01-02 03:04:05")
    ]
    brain_sql.remember(conn, [{"_id": "x", "text": "Deploys happen on Fridays.", "observed_at": "2023-06-01"}])
    assert rows(conn, "select observed_at, created_at from knowledge") == [
        ("2023-06-01 00:00:00", "2024-01-02 03:04:05")
    ]
    assert brain_sql.check(conn) == {}


def test_a_turn_corrected_without_its_time_keeps_its_day(tmp_path):
    """docs/ingest.md: a conversation turn's correction that gives no observed_at is
    still said on the stored turn's day, in its title and context too, and keeps
    created_at (it was titled "in s1" and stored as said now); a turn first
    given no day stays without one."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    turn = {"_id": "t1", "text": "I went to a support group yesterday.", "speaker": "Caroline", "session_id": "s1"}
    brain_sql.remember(conn, [{**turn, "observed_at": "2023-05-08T13:56:00"}, {**turn, "_id": "t2", "text": "Hi"}])
    with conn:  # as if stored a while ago
        conn.execute("update knowledge set created_at = '2024-01-02 03:04:05'")
    brain_sql.remember(conn, [{**turn, "text": "I went to a support group last week."}])
    assert rows(conn, "select title, observed_at, created_at, context from knowledge where external_id = 't1'") == [
        (
            "Caroline, 8 May 2023",
            "2023-05-08 13:56:00",
            "2024-01-02 03:04:05",
            "Caroline, 8 May 2023\nlast week: the week of 1 May 2023",
        )
    ]
    brain_sql.remember(conn, [{**turn, "_id": "t2", "text": "Hello"}])
    title, context = rows(conn, "select title, context from knowledge where external_id = 't2'")[0]
    assert (title, context.split("\n")[0]) == ("Caroline in s1", "Caroline")
    assert brain_sql.check(conn) == {}


def test_a_turn_keeps_its_day_however_it_is_corrected(tmp_path):
    """Review 51: a turn corrected by its file ingested again keeps its day too (its
    observed_at was kept under a title and context without it); a day changed with
    plain SQL is the day kept, as check --repair would write it; a new version (a
    later valid_from) is a new memory, said when it says, not on the old one's day."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    turn = {"_id": "t1", "text": "I went to a support group yesterday.", "speaker": "Caroline", "session_id": "s1"}
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({**turn, "observed_at": "2023-05-08T13:56:00"}) + "\n")
    brain_sql.ingest(conn, [transcript])
    transcript.write_text(json.dumps({**turn, "text": "I went to a support group last week."}) + "\n")
    brain_sql.ingest(conn, [transcript])
    said = "select title, observed_at, substr(context, 1, instr(context || char(10), char(10)) - 1) from knowledge"
    assert rows(conn, said) == [("Caroline, 8 May 2023", "2023-05-08 13:56:00", "Caroline, 8 May 2023")]
    with conn:
        conn.execute("update knowledge set observed_at = '2023-06-01 09:00:00'")
    brain_sql.remember(conn, [{**turn, "text": "I went to a support group on Sunday."}])
    assert rows(conn, said) == [("Caroline, 1 June 2023", "2023-06-01 09:00:00", "Caroline, 1 June 2023")]
    assert brain_sql.check(conn) == {}
    brain_sql.remember(conn, [{**turn, "_id": "v", "text": "My plan: weekly.", "valid_from": "2023-05-08"}])
    brain_sql.remember(conn, [{**turn, "_id": "v", "text": "My plan: daily.", "valid_from": "2024-01-01"}])
    newest = rows(conn, said + " where content = 'My plan: daily.'")
    assert newest[0][0] == "Caroline in s1" and newest[0][2] == "Caroline" and newest[0][1] > "2026"
    assert brain_sql.check(conn) == {}


def test_a_record_placed_in_another_records_document_is_refused(tmp_path):
    """`_document` puts an exported record back where it was; naming another
    record's document (another `_id`) took that record's place: its `_id` named
    nothing, and its file's next ingest removed the remembered record without a
    word (review 105, M2). Its own document it still replaces."""
    folder = tmp_path / "v"
    folder.mkdir()
    (folder / "r.jsonl").write_text('{"_id": "a", "text": "alpha record"}\n')
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [folder])
    [(document,)] = rows(conn, "select document_id from knowledge")
    before = rows(conn, "select * from knowledge")
    for given in ({"_id": "zzz"}, {}):
        report, ids = brain_sql.remember(conn, [{**given, "_document": document, "text": "hijack"}])
        assert ids == [] and [e.message for e in report.errors] == [
            f"record 1: its '_document' {shown(document)} holds the record with _id \"a\": a record replaces "
            "only its own document; give that _id, or leave '_document' out"
        ]
        assert rows(conn, "select * from knowledge") == before
    report, ids = brain_sql.remember(conn, [{"_id": "a", "_document": document, "text": "alpha, corrected"}])
    assert not report.errors and rows(conn, "select external_id, document_id, content from knowledge") == [
        ("a", document, "alpha, corrected")
    ]


def test_a_record_placed_as_an_earlier_version_in_another_records_document_is_refused(tmp_path):
    """The same with `_version_of`: m2's document took m1's earlier version and m2 was
    gone, or m1's history version took another _id (review 107, H2)."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    first = [
        {"_id": "m1", "text": "Alpha one.", "valid_from": "2024-01-01"},
        {"_id": "m2", "text": "Beta two.", "valid_from": "2024-01-01"},
    ]
    brain_sql.remember(conn, first)
    brain_sql.remember(conn, [{"_id": "m1", "text": "Alpha one, second.", "valid_from": "2024-06-01"}])
    before = rows(conn, "select * from knowledge")
    history = "remember#m1@2024-01-01 00:00:00"
    for placed, holder in [
        ({"_id": "m1", "_document": "remember#m2", "valid_from": "2023-01-01"}, "m2"),
        ({"_id": "m9", "_document": history, "valid_from": "2024-01-01"}, "m1"),
    ]:
        report, ids = brain_sql.remember(conn, [{**placed, "_version_of": "remember#m1", "text": "evil"}])
        assert ids == [] and [e.message for e in report.errors] == [
            f"record 1: its '_document' {shown(placed['_document'])} holds the record with _id {shown(holder)}: "
            "a record replaces only its own document; give that _id, or leave '_document' out"
        ]
        assert rows(conn, "select * from knowledge") == before


def test_a_scope_source_or_domain_recall_could_not_filter_for_is_refused_by_name(tmp_path):
    """A scope of 601 characters was stored, and no recall or listing could name it:
    their filters take 500 (review 112). Each field is held to what the filters take."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    longest = {"text": "Kept.", "scope": "/" + "s" * 499, "source": "r" * 500, "domain": "d" * 500}
    report, _ = brain_sql.remember(
        conn,
        [
            longest,
            {"text": "x", "scope": "/" + "s" * 600},
            {"text": "x", "source": "r" * 501},
            {"text": "x", "domain": "d" * 501},
        ],
    )
    assert [e.message.split(": ", 1)[1] for e in report.errors] == [
        "scope is 601 characters; the limit is 500, what recall's filters take",
        "source is 501 characters; the limit is 500, what recall's filters take",
        "domain is 501 characters; the limit is 500, what recall's filters take",
    ]
    report, _ = brain_sql.remember(conn, [longest])
    assert not report.errors
    query = {"q": "Kept", "scope": longest["scope"], "sources": [longest["source"]], "domain": "d" * 500}
    assert [hit["content"] for hit in brain_sql.recall(conn, query)["hits"]] == ["Kept."]
