"""Remember through the library: the same text in another scope is another memory,
a repeat is stored once, and a batch is written with few full-text index segments.
`sqlite-utils brain remember` is tested in test_cli_remember.py; one transaction
whatever its size, in test_writers.py."""

import pytest

import brain_sql
from brain_sql import pipeline, writer

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
