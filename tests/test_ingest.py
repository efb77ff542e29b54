"""Ingest through the library: remember stores records as memories, a repeat once.
`sqlite-utils brain ingest` is tested in test_cli_ingest.py."""

import pytest

import brain_sql
from brain_sql import mentions
from brain_sql.connection import atomic
from brain_sql.consistency import check

from .conftest import VAULT, edges, rows


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


@pytest.mark.parametrize("lookup_chunks", [0, 200])  # every name in one automaton, or looked up run by run
def test_mentions_found_alike_by_automaton_and_lookup(tmp_path, monkeypatch, lookup_chunks):
    monkeypatch.setattr(mentions, "MENTION_LOOKUP_CHUNKS", lookup_chunks)
    conn = brain_sql.connect(tmp_path / "brain.db")
    names = ["C++", ".NET Core", "Straße", "Mark King (musician)", "New York", "New York City", "data_set"]
    brain_sql.remember(conn, [{"_id": f"n{i}", "title": name, "text": f"About {i}."} for i, name in enumerate(names)])
    brain_sql.remember(conn, [
        {"_id": "yes", "title": "Port notes", "text": "We ported the c++ parser to .NET CORE in the STRASSE office "
                                                      "with Mark King, in New York City; data_set."},
        {"_id": "no", "title": "Near misses", "text": "Not xC++, data_set2, NewYork, Mark Kingdom or mark-kingly."},
    ])  # fmt: skip
    mentioned = {(a, b) for a, relation, b in edges(conn) if relation == "mentions"}
    assert mentioned == {("Port notes", name) for name in names} | {("New York City", "New York")}  # its title
    assert check(conn) == {}


def test_mentions_matched_later_follow_the_entities_as_they_are_then(tmp_path):
    """Ingest matches queued mentions in transactions of their own, with names read
    before them: an entity forgotten meanwhile is not mentioned, one made meanwhile is."""
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": "quokka", "title": "Quokka Crew", "text": "A team."}])
    _, [notes] = brain_sql.remember(conn, [{"_id": "notes", "title": "Notes", "text": "The Quokka Crew met the Okapi Office."}])
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
