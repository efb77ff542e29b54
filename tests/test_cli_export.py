"""`sqlite-utils brain export DB`: the export on stdout, progress on stderr, the
file untouched; `brain ingest` of it into a new brain — with the same model, or
with another — exports the same lines again."""

import json

import pytest

import brain_sql

from .conftest import fingerprint, write


def test_export_writes_every_memory_to_stdout_and_changes_nothing(run, vault_brain_path, tmp_path):
    conn = brain_sql.connect(vault_brain_path, read_only=True)
    before, expected = fingerprint(conn), "".join(brain_sql.export(conn))
    result = run("brain", "export", vault_brain_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected and len(expected.splitlines()) == 20
    assert "Exporting" in result.stderr  # the progress bar (a label alone where stderr is no terminal)
    assert fingerprint(conn) == before
    # into a new brain and out again: the same lines
    export = write(tmp_path / "brain.jsonl", result.stdout)
    ingested = run("brain", "ingest", tmp_path / "copy.db", export)
    assert ingested.exit_code == 0, ingested.output
    assert run("brain", "export", tmp_path / "copy.db").stdout == result.stdout


def test_export_of_what_is_no_brain_says_so(run, tmp_path):
    missing = run("brain", "export", tmp_path / "nothing.db")
    assert missing.exit_code == 1 and "does not exist" in missing.output
    assert not (tmp_path / "nothing.db").exists()
    other = tmp_path / "other.db"
    brain_sql.connect(other).execute("create table t (x)")
    refused = run("brain", "export", other)
    assert refused.exit_code == 1 and "is not a brain" in refused.output and "Traceback" not in refused.output


@pytest.mark.slow  # embeds the vault with a transformer
def test_an_export_ingested_with_another_model_exports_the_same(run, vault_brain_path, tmp_path):
    first = run("brain", "export", vault_brain_path).stdout
    export = write(tmp_path / "brain.jsonl", first)
    result = run("brain", "ingest", tmp_path / "minilm.db", export, "--model", brain_sql.MINILM_MODEL)
    assert result.exit_code == 0, result.output
    assert run("brain", "export", tmp_path / "minilm.db").stdout == first
    copy = brain_sql.connect(tmp_path / "minilm.db")
    assert brain_sql.info(copy)["model"] == brain_sql.MINILM_MODEL and brain_sql.check(copy) == {}
    hits = brain_sql.recall(copy, {"q": "How does the graph leg rank memories?"})["hits"]
    assert hits[0]["title"] == "Graph Leg"
    assert {json.loads(line)["_chunks"][0]["id"] for line in first.splitlines()} <= {
        h for (h,) in copy.execute("select id from knowledge")
    }
