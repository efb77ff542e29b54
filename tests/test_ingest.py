"""Ingest through the library: remember stores records as memories, a repeat once.
`sqlite-utils brain ingest` is tested in test_cli_ingest.py."""

import brain_sql

from .conftest import VAULT, rows


def test_same_text_in_another_scope_is_another_memory(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    from brain_sql.pipeline import remember

    for scope in ("/acme", "/globex"):
        report, ids = remember(conn, [{"title": "Wifi", "text": "The wifi password rotates.", "scope": scope}])
        assert not report.errors and ids[0]
    assert rows(conn, "select scope from knowledge order by scope") == [("/acme",), ("/globex",)]
    record = {"title": "Door", "text": "The door code changes weekly."}
    report, ids = remember(conn, [record, record])  # a repeat is stored once and answered with its ids
    assert not report.errors and ids[0] and ids[0] == ids[1]


def test_the_report_counts_what_was_stored(tmp_path):
    """Counts come from the rows written, never from the change log's rows too."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [VAULT])
    stored = {table: conn.execute(f"select count(*) from {table}").fetchone()[0]
              for table in ("knowledge", "entities", "relationships", "documents")}  # fmt: skip
    assert (report.chunks_added, report.entities, report.relationships, report.documents_added) == (
        stored["knowledge"], stored["entities"], stored["relationships"], stored["documents"])  # fmt: skip
