"""Remember through the library: the same text in another scope is another memory,
a repeat is stored once, and a batch is written with few full-text index segments.
`sqlite-utils brain remember` is tested in test_cli_remember.py; one transaction
whatever its size, in test_writers.py."""

import pytest

import brain_sql
from brain_sql import writer

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
