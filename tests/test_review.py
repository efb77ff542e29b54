"""Regressions for review findings: inputs that once gave a 500 or a traceback,
or stored something other than what was asked."""

import json

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql.consistency import check

from .conftest import VAULT, rows, write


def test_recall_on_a_brain_that_names_no_entity(run, tmp_path):
    path = write(tmp_path / "r.jsonl", json.dumps({"text": "The pager rota changes on Mondays."}))
    db_path = tmp_path / "brain.db"
    assert run("brain", "ingest", db_path, path).exit_code == 0
    result = run("brain", "recall", db_path, "when does the pager rota change", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["hits"]


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


def test_repeated_ids_in_a_file(run, tmp_path):
    same = {"_id": "a", "text": "one"}
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in [same, same, {"_id": "b", "text": "two"}]))
    db_path = tmp_path / "brain.db"
    for _ in range(2):  # an exact repeat is stored once, run after run
        assert run("brain", "ingest", db_path, path).exit_code == 0
        assert rows(brain_sql.connect(db_path), "select external_id from knowledge order by 1") == [("a",), ("b",)]
    path.write_text("\n".join(json.dumps(r) for r in [same, {"_id": "a", "text": "other"}]))
    result = run("brain", "ingest", db_path, path)
    assert result.exit_code == 1 and "repeats the id of an earlier record with other content: a" in result.output
    assert rows(brain_sql.connect(db_path), "select content from knowledge where external_id = 'a'") == [("one",)]


def test_a_malformed_document_never_stops_the_run(run, tmp_path):
    write(tmp_path / "in" / "mixed.md", "---\n2024: x\nproject: y\n---\n# Mixed\n\nkeys of two types\n")
    write(tmp_path / "in" / "r.jsonl", "\n".join(json.dumps(r) for r in [
        {"text": "far", "observed_at": "-99999y"}, {"text": "huge", "relevance_tier": 1e400}, {"text": "fine"}]))  # fmt: skip
    db_path = tmp_path / "brain.db"
    result = run("brain", "ingest", db_path, tmp_path / "in")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "observed_at '-99999y' is out of range" in result.output
    assert "relevance_tier must be a number" in result.output
    conn = brain_sql.connect(db_path)
    assert {r[0] for r in rows(conn, "select content from knowledge")} == {"# Mixed\n\nkeys of two types", "fine"}
    assert check(conn) == {}


def test_ancient_expiry_is_stored_and_expires(tmp_path):
    path = write(tmp_path / "r.jsonl", json.dumps({"title": "Old", "text": "an ancient rule", "expires_at": "0001-01-01"}))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    assert rows(conn, "select expires_at from knowledge") == [("0001-01-01 00:00:00",)]
    assert brain_sql.recall(conn, {"q": "ancient rule", "include_decayed": True})["hits"]
    assert not brain_sql.recall(conn, {"q": "ancient rule"})["hits"]


def test_cli_refuses_a_file_that_is_not_a_brain(run, tmp_path):
    import sqlite3

    sqlite3.connect(tmp_path / "plain.db").execute("create table t (x)")
    result = run("brain", "recall", tmp_path / "plain.db", "anything")
    assert result.exit_code == 1 and "is not a brain" in result.output and "Traceback" not in result.output


@pytest.fixture(scope="module")
def brain_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("review") / "brain.db"
    brain_sql.ingest(brain_sql.connect(path), [VAULT])
    return path


@pytest.mark.asyncio
async def test_inputs_that_once_gave_500s(brain_path):
    datasette = Datasette([str(brain_path)])
    checks = [
        ("get", "/brain/-/recall", {"params": {"q": "x", "k": "²"}}, 400),
        ("get", "/brain/-/recall", {"params": {"q": "x", "since": "-99999y"}}, 400),
        ("get", "/brain/-/recall", {"params": {"q": "graph leg before 9999-12-31 in the last 99999999 years"}}, 200),
        ("post", "/brain/-/recall", {"content": b"[" * 100_000, "headers": {"content-type": "application/json"}}, 400),
        ("get", "/brain/-/memory/99999999999999999", {}, 404),
        ("get", "/brain/-/memory/999999999999999999999", {}, 404),
        ("post", "/brain/-/verify", {"json": {"claim": "x", "id": 2**70}}, 400),
        ("get", "/brain/-/brain", {"params": {"q": "graph leg", "provenance": "false"}}, 200),
    ]
    for method, path, kwargs, status in checks:
        response = await getattr(datasette.client, method)(path, **kwargs)
        assert response.status_code == status, (path, kwargs, response.text[:200])


@pytest.mark.asyncio
async def test_table_permission_guards_the_memories(brain_path):
    metadata = {"databases": {"brain": {"tables": {"knowledge": {"allow": False}}}}}
    datasette = Datasette([str(brain_path)], metadata=metadata)
    for path in ("/brain/-/recall?q=graph", "/brain/-/memory/1", "/brain/-/decayed.json"):
        assert (await datasette.client.get(path)).status_code == 403, path
