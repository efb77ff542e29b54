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


def test_numbers_past_pythons_digit_limit_and_deep_nesting_skip_one_record(tmp_path):
    """json and yaml raise ValueError for an integer of over 4,300 digits, and
    RecursionError for deep nesting: each is that record's problem, named with
    its file and line, and the rest still go in."""
    folder = tmp_path / "in"
    folder.mkdir()
    big = "9" * 5000
    (folder / "records.jsonl").write_text(
        '{"_id": "ok1", "text": "fine"}\n{"_id": "big", "text": "x", "confidence": ' + big + '}\n'
        + '{"_id": "deep", "text": "x", "metadata": ' + "[" * 3000 + "]" * 3000 + "}\n"
        + '{"_id": "ok2", "text": "also fine"}\n'
    )
    (folder / "big.md").write_text(f"---\nconfidence: {big}\n---\n# Big\n\ntext\n")
    (folder / "deep.md").write_text("---\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n# Deep\n\ntext\n")
    (folder / "fine.md").write_text("# Fine\n\na note that is fine\n")
    (folder / "hex.md").write_text("---\nextra: 0x" + "f" * 4000 + "\n---\n# Hex\n\ntext\n")
    (folder / "surrogate.md").write_text('---\ntitle: "\\uD800"\n---\n# S\n\ntext\n')
    (folder / "yes.md").write_text("---\ntitle: yes\n---\n# Yes\n\ntext\n")
    (folder / "bools.jsonl").write_text('{"title": true, "text": "a title that is not one"}\n'
                                        '{"_id": "nan", "text": "x", "metadata": {"x": NaN}}\n')
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    problems = sorted((e.path.rsplit("/", 1)[-1], e.line) for e in report.errors)
    assert problems == [("big.md", 1), ("bools.jsonl", 1), ("bools.jsonl", 2), ("deep.md", 1), ("hex.md", 1), ("records.jsonl", 2),
                        ("records.jsonl", 3), ("surrogate.md", 1), ("yes.md", 1)], report.errors  # fmt: skip
    assert {r[0] for r in rows(conn, "select coalesce(external_id, title) from knowledge")} == {"ok1", "ok2", "fine"}
