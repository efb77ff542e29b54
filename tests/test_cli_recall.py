"""Recall through the CLI: `sqlite-utils brain recall`, RECALL_SQL in `sqlite-utils
query`, `brain eval`, and what recall says of a brain naming no entity or a file
that is not a brain."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import brain_sql

from .conftest import VAULT, write

SQL = brain_sql.RECALL_SQL
ROOT = Path(__file__).parent.parent


def test_recall_cli(run, vault_brain_path):
    db_path = vault_brain_path
    readable = run("brain", "recall", db_path, "what does the graph leg do", "--k", "2")
    assert readable.exit_code == 0, readable.output
    assert "1. Graph Leg" in readable.output and "Graph Leg.md:5-" in readable.output
    assert re.search(r"\(relevance 0\.\d\d; score", readable.output)
    everything = json.loads(
        run("brain", "recall", db_path, "what does the graph leg do", "--k", "8", "--no-cutoff", "--json").output
    )
    assert len(everything["hits"]) == 8 and everything["query"]["cutoff"] is False
    as_json = json.loads(run("brain", "recall", db_path, "what does the graph leg do", "--json", "--no-graph").output)
    assert as_json["decision"] == "ok" and all(h["provenance"]["graph_rank"] is None for h in as_json["hits"])
    nonsense = run("brain", "recall", db_path, "zzyzx qwfp blorft")
    assert "No memory returned" in nonsense.output and "confidence" in nonsense.output
    bad = run("brain", "recall", db_path, "pager", "--since", "soonish")
    assert bad.exit_code == 2 and "is not a date" in bad.output


@pytest.mark.parametrize(
    "command, twice, named",
    [
        ("recall", ["--scope", "/acme/sales", "--scope", "/acme/support"], "--scope is given twice"),
        ("recall", ["--k", "1", "--k", "2"], "--k is given twice"),
        ("recall", ["--prf", "--no-prf"], "--prf/--no-prf is given twice"),
        ("ingest", ["--scope", "/a", "--scope", "/b"], "--scope is given twice"),
    ],
)
def test_an_option_of_one_value_given_twice_is_a_usage_error(run, vault_brain_copy, tmp_path, command, twice, named):
    """Click keeps an option's last value and drops the other without a word: the
    recall answered for /acme/support alone. Refused by name, as a parameter given
    twice is over HTTP (review 102 M2); repeatable options still repeat."""
    argument = "support runbook" if command == "recall" else str(write(tmp_path / "n.txt", "A note."))
    result = run("brain", command, vault_brain_copy, argument, *twice)
    assert result.exit_code == 2 and named in result.output and "give it once" in result.output, result.output
    helped = run("brain", command, vault_brain_copy, argument, *twice, "--help")
    assert helped.exit_code == 0 and "Usage:" in helped.output and "given twice" not in helped.output
    both = run("brain", "recall", vault_brain_copy, "pricing", "--class", "memory", "--class", "policy", "--json")
    assert both.exit_code == 0 and json.loads(both.output)["query"]["classes"] == ["memory", "policy"]


def test_a_record_is_cited_by_its_id_not_by_line_1_of_its_file(run, tmp_path):
    """A record's lines are its own text's, so every one-line record said `:1-1`,
    which reads as line 1 of its file (review 68): it is cited by its id."""
    db_path = tmp_path / "brain.db"
    records = write(
        tmp_path / "r.jsonl",
        '{"_id": "a", "text": "Deploys happen on Tuesdays."}\n{"_id": "b", "text": "Pagers go to Dana."}\n'
        '{"text": "Backups run nightly at two."}\n',
    )
    assert run("brain", "ingest", db_path, records).exit_code == 0
    readable = run("brain", "recall", db_path, "pagers Dana", "--k", "1", "--no-cutoff")
    assert f"   {records}#b · memory" in readable.output, readable.output
    assert ":1-1" not in readable.output
    # without an _id, its id is a hash no file holds: its file alone
    readable = run("brain", "recall", db_path, "nightly backups", "--k", "1", "--no-cutoff")
    assert f"   {records} · memory" in readable.output, readable.output


def test_sql_recall_runs_in_sqlite_utils_query(run, tmp_path):
    db_path = tmp_path / "brain.db"
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    filters = [arg for name in ("classes", "sources", "domain", "since", "until", "as_of") for arg in ("-p", name, "")]
    result = run(
        "query", db_path, SQL, "-p", "q", "what does the graph leg do", "-p", "k", "3", "-p", "scope", "/", *filters
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert len(hits) == 3 and hits[0]["title"] == "Graph Leg"
    assert hits[0]["score"] > hits[1]["score"] >= hits[2]["score"]


def test_eval_prints_the_exact_shape(run, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text((Path(__file__).parent / "data" / "beir_corpus_sample.jsonl").read_text())
    first = [json.loads(line) for line in corpus.read_text().splitlines()[:3]]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps({"_id": f"q{i}", "text": r["title"]}) for i, r in enumerate(first)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{r['_id']}\t1\n" for i, r in enumerate(first)))
    db_path = tmp_path / "brain.db"
    run("brain", "ingest", db_path, corpus)
    result = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert list(scores) == ["queries", "full", "no_graph", "vector", "fts", "graph"]
    assert scores["queries"] == 3
    for mode in ("full", "no_graph", "vector", "fts", "graph"):
        assert list(scores[mode]) == ["ndcg@10", "recall@2", "recall@5", "recall@10", "mrr@10"]
    assert scores["fts"]["recall@10"] == 1.0  # a title finds its own record
    assert "judged relevant" not in result.stderr
    # a judged id no record holds counts as a miss, and is said to
    other = tmp_path / "other.tsv"
    other.write_text(qrels.read_text() + "q0\tno-such-record\t1\n")
    result = run("brain", "eval", db_path, "--queries", queries, "--qrels", other)
    assert result.exit_code == 0 and json.loads(result.stdout)["fts"]["recall@10"] < 1.0
    assert "1 of the 4 corpus ids judged relevant are no record's _id in" in result.stderr, result.stderr
    for k in ("\u0661", "\uff15", "1_0", "0", "101"):  # ASCII digits, 1 to 100, as recall's k
        result = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels, "--k", k)
        assert result.exit_code == 2 and "Invalid value for '--k': k must be a whole number" in result.output, k
    # a file past what is read whole (/dev/zero: read until the machine ran out of memory, review 88)
    result = run("brain", "eval", db_path, "--queries", "/dev/zero", "--qrels", qrels)
    assert result.exit_code != 0 and "/dev/zero is longer than 100,000,000 bytes" in result.output, result.output


def test_eval_per_query_writes_each_querys_metrics(run, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text((Path(__file__).parent / "data" / "beir_corpus_sample.jsonl").read_text())
    first = [json.loads(line) for line in corpus.read_text().splitlines()[:4]]
    queries = write(
        tmp_path / "queries.jsonl",
        "\n".join(json.dumps({"_id": f"q{i}", "text": r["title"]}) for i, r in enumerate(first)),
    )
    qrels = write(tmp_path / "qrels.tsv", "".join(f"q{i}\t{r['_id']}\t1\n" for i, r in enumerate(first)))
    db_path = tmp_path / "brain.db"
    run("brain", "ingest", db_path, corpus)
    result = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels, "--per-query", tmp_path / "a.jsonl")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [line["query_id"] for line in lines] == ["q0", "q1", "q2", "q3"]
    assert lines[0]["text"] == first[0]["title"] and lines[0]["judged"] == [first[0]["_id"]]
    for mode in ("full", "no_graph", "vector", "fts", "graph"):
        for metric, mean in summary[mode].items():  # the summary is the mean of the lines
            assert round(sum(line[mode][metric] for line in lines) / len(lines), 4) == mean
        assert all(len(line["ranked"][mode]) <= 10 for line in lines)
    # two runs compared query by query
    run(
        "brain",
        "eval",
        db_path,
        "--queries",
        queries,
        "--qrels",
        qrels,
        "--k",
        "2",
        "--per-query",
        tmp_path / "b.jsonl",
    )
    compared = subprocess.run(
        [sys.executable, ROOT / "bench" / "compare.py", tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--json"],
        capture_output=True,
        text=True,
    )
    assert compared.returncode == 0, compared.stderr
    found = json.loads(compared.stdout)
    assert found["queries"] == 4 and found["only_a"] == found["only_b"] == 0
    same = found["fts"]["recall@2"]  # the top two are the top two, whatever k
    assert (same["wins"], same["losses"], same["ties"], same["mean_delta"], same["sign_p"]) == (0, 0, 4, 0.0, 1.0)
    assert same["t_p"] is None
    bad = run(
        "brain", "eval", db_path, "--queries", queries, "--qrels", qrels, "--per-query", tmp_path / "no" / "c.jsonl"
    )
    assert bad.exit_code == 2 and "No such file or directory" in bad.output
    # an input is never the output: the queries, the qrels and the brain stay whole
    for given in (queries, qrels, db_path):
        before = given.read_bytes()
        bad = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels, "--per-query", given)
        assert bad.exit_code == 2 and "an input" in bad.output and given.read_bytes() == before


@pytest.mark.parametrize(
    "queries, qrels, message",
    [
        ('{"_id": "q0"}\n', "q0\tx\t1\n", 'queries.jsonl:1: a query needs "_id" and "text"'),
        ('{"_id": "q0", "text": "a"}\n{oops\n', "q0\tx\t1\n", "queries.jsonl:2: not a JSON object"),
        (
            '{"_id": "q0", "text": "a"}\n{"_id": "q0", "text": "b"}\n',
            "q0\tx\t1\n",
            "queries.jsonl:2: query id 'q0' again",
        ),
        ('{"_id": "q0", "text": "a"}\n', "query\tcorpus\tscore\n", "no query of"),
        ('{"_id": "q0", "text": "a"}\n', b"\xff\xfe", "qrels.tsv: not UTF-8 text"),
        ('{"_id": "q0", "text": "a\\u0000b"}\n', "q0\tx\t1\n", "query 'q0': q must not hold a NUL character"),
        ('{"_id": "q0", "text": " "}\n', "q0\tx\t1\n", "query 'q0': q must not be empty"),
        # review 102: a grade that is no number was passed over, and eval said no query was judged
        ('{"_id": "q0", "text": "a"}\n', "query-id\tcorpus-id\tscore\nq0\tx\tyes\n", "qrels.tsv:2: score 'yes'"),
        ('{"_id": "q0", "text": "a"}\n', "q0\tx\t1\nq0 y 1\n", "qrels.tsv:2: 1 tab-separated column(s)"),
        ('{"_id": "q0", "text": "a"}\n', "q0\tx\t1\nq0\ty\t\u00b2\n", "qrels.tsv:2: score '\u00b2'"),
        # review 152: qrels of another corpus scored 0 everywhere without a word
        ('{"_id": "q0", "text": "a"}\n', "q0\tzzz\t1\n", "no corpus id the qrels judge relevant ('zzz'...)"),
    ],
)
def test_eval_names_what_is_wrong_with_its_inputs(run, tmp_path, queries, qrels, message):
    db_path = tmp_path / "brain.db"
    run("brain", "remember", db_path, write(tmp_path / "r.jsonl", '{"_id": "x", "text": "a"}'))
    (tmp_path / "queries.jsonl").write_text(queries)
    (tmp_path / "qrels.tsv").write_bytes(qrels if isinstance(qrels, bytes) else qrels.encode())
    result = run("brain", "eval", db_path, "--queries", tmp_path / "queries.jsonl", "--qrels", tmp_path / "qrels.tsv")
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_eval_names_its_now_option_not_a_query(run, tmp_path):
    """--now yesterday was said as query '1''s fault (review 102 L5)."""
    db_path = tmp_path / "brain.db"
    run("brain", "remember", db_path, write(tmp_path / "r.jsonl", '{"_id": "x", "text": "a"}'))
    queries = write(tmp_path / "queries.jsonl", '{"_id": "1", "text": "a"}\n')
    qrels = write(tmp_path / "qrels.tsv", "1\tx\t1\n")
    result = run("brain", "eval", db_path, "--queries", queries, "--qrels", qrels, "--now", "yesterday")
    assert result.exit_code == 2 and "Invalid value for '--now'" in result.output and "query '1'" not in result.output


def test_compare_counts_wins_and_tests_them(tmp_path):
    def lines(values):
        return "\n".join(json.dumps({"query_id": f"q{i}", "full": {"ndcg@10": v}}) for i, v in enumerate(values))

    write(tmp_path / "a.jsonl", lines([0.5] * 8))
    write(tmp_path / "b.jsonl", lines([0.6] * 7 + [0.4]))
    compared = subprocess.run(
        [sys.executable, ROOT / "bench" / "compare.py", tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--modes", "full"],
        capture_output=True,
        text=True,
    )
    assert compared.returncode == 0, compared.stderr
    header, row = compared.stdout.splitlines()[2:4]
    assert header.split() == [
        "mode",
        "metric",
        "A",
        "B",
        "B",
        "-",
        "A",
        "wins",
        "losses",
        "ties",
        "sign",
        "p",
        "t",
        "p",
    ]
    # 7 wins, 1 loss: sign test p = 2 * 9/256; mean delta (7 * 0.1 - 0.1) / 8 = 0.075
    assert row.split()[:9] == ["full", "ndcg@10", "0.5000", "0.5750", "+0.0750", "7", "1", "0", "0.0703"]


def test_recall_on_a_brain_that_names_no_entity(run, tmp_path):
    path = write(tmp_path / "r.jsonl", json.dumps({"text": "The pager rota changes on Mondays."}))
    db_path = tmp_path / "brain.db"
    assert run("brain", "ingest", db_path, path).exit_code == 0
    result = run("brain", "recall", db_path, "when does the pager rota change", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["hits"]


def test_cli_refuses_a_file_that_is_not_a_brain(run, tmp_path):
    import sqlite3

    sqlite3.connect(tmp_path / "plain.db").execute("create table t (x)")
    result = run("brain", "recall", tmp_path / "plain.db", "anything")
    assert result.exit_code == 1 and "is not a brain" in result.output and "Traceback" not in result.output


def test_recall_options_are_checked_by_the_querydoc_and_named(run, vault_brain_path):
    for args, message in (
        (("--k", "0"), "Invalid value for '--k': k must be from 1 to 100, not 0"),
        (("--k", "abc"), "Invalid value for '--k': k must be a whole number"),
        (("--k", "1234567890"), "Invalid value for '--k': k must be from 1 to 100, not 1234567890"),
        (("--k", "9" * 5000), "Invalid value for '--k': k must be a whole number"),
        (("--min-relevance", "9"), "Invalid value for '--min-relevance': min_relevance must be from 0 to 3"),
        (("--class", "bogus"), "Invalid value for '--class': classes must be among memory, reference, policy"),
        (("--scope", ""), "Invalid value for '--scope': scope must be a path"),
    ):
        result = run("brain", "recall", vault_brain_path, "graph leg", *args)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, args
    assert "[memory|reference|policy]" in run("brain", "recall", "--help").output


def test_a_repeatable_option_takes_each_value_whole(run, tmp_path):
    path = write(
        tmp_path / "r.jsonl", json.dumps({"_id": "a", "title": "Invoice", "text": "The invoice run is on the 3rd."})
    )
    db_path = tmp_path / "brain.db"
    assert run("brain", "ingest", db_path, path, "--source", "crm,eu").exit_code == 0
    found = json.loads(run("brain", "recall", db_path, "invoice run", "--source", "crm,eu", "--json").output)
    assert [hit["source"] for hit in found["hits"]] == ["crm,eu"]


def test_recall_as_of(run, tmp_path):
    records = [
        {
            "_id": "rota",
            "title": "Weekend rota",
            "text": "Kim leads escalations on weekends.",
            "valid_from": "2024-01-01",
            "valid_to": "2025-01-01",
        }
    ]
    db_path = tmp_path / "brain.db"
    assert run("brain", "ingest", db_path, write(tmp_path / "r.jsonl", json.dumps(records[0]))).exit_code == 0
    then = run("brain", "recall", db_path, "who leads escalations on weekends?", "--as-of", "2024-06-01")
    assert then.exit_code == 0 and "1. Weekend rota" in then.output and "as of 2024-06-01 00:00:00" in then.output
    found = json.loads(run("brain", "recall", db_path, "who leads escalations on weekends?", "--json").output)
    assert found["hits"] == [] and found["query"]["as_of"] == found["query"]["now"]
    bad = run("brain", "recall", db_path, "rota", "--as-of", "back then")
    assert bad.exit_code == 2 and "Invalid value for '--as-of': as_of \"back then\" is not a date" in bad.output


def test_eval_gains_nothing_from_a_grade_below_zero(run, tmp_path):
    """Review 146: a qrels grade of -1 (judged harmful) was a negative gain, and nDCG@10
    came out above 1; as in trec_eval, it gains nothing."""
    corpus = write(
        tmp_path / "corpus.jsonl",
        json.dumps({"_id": "a", "title": "Aspirin", "text": "Aspirin reduces the risk of heart attack."})
        + "\n"
        + json.dumps({"_id": "b", "title": "Statins", "text": "Statins lower cholesterol."})
        + "\n",
    )
    queries = write(tmp_path / "q.jsonl", json.dumps({"_id": "q1", "text": "aspirin heart attack"}) + "\n")
    qrels = write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t1\nq1\tb\t-1\n")
    run("brain", "ingest", tmp_path / "brain.db", corpus)
    result = run("brain", "eval", tmp_path / "brain.db", "--queries", queries, "--qrels", qrels)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["fts"]["ndcg@10"] == 1.0 and all(summary[m]["ndcg@10"] <= 1.0 for m in summary if m != "queries")
