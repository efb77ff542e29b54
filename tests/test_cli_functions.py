"""The SQL functions through `sqlite-utils query`: brain_verify, brain_fts_query on
real FTS5, brain_embed, and sqlite-vec, all registered by the sqlite-utils hook."""

import json

import numpy as np

from .conftest import VAULT


def query(run, db_path, sql, **params):
    args = ["query", db_path, sql]
    for name, value in params.items():
        args += ["-p", name, value]
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_sqlite_utils_query_has_the_functions(db_path, run):
    run("brain", "init", db_path)
    result = run("query", db_path, "select vec_version() as v, brain_fts_query('a b') as q")
    assert result.exit_code == 0, result.output
    assert '"q": "\\"b\\""' in result.output  # 'a' is a stopword


def test_verify_is_case_and_whitespace_tolerant(run, db_path):
    run("brain", "init", db_path)
    text = "Escalations go to  Dana\nWhitfield first. Later, DANA WHITFIELD signs off."
    [row] = query(run, db_path, "select brain_verify(:claim, :text) as v", claim="dana whitfield", text=text)
    result = json.loads(row["v"])
    assert result["supported"] is True
    assert result["decision"] == "supported"
    assert [text[a:b] for a, b in result["match_ranges"]] == ["Dana\nWhitfield", "DANA WHITFIELD"]


def test_verify_unsupported_claim(run, db_path):
    run("brain", "init", db_path)
    [row] = query(run, db_path, "select brain_verify('Dana approves refunds.', 'Dana runs support.') as v")
    assert json.loads(row["v"]) == {"supported": False, "decision": "unsupported", "match_ranges": []}


def test_verify_ignores_edge_punctuation_and_regex_syntax(run, db_path):
    run("brain", "init", db_path)
    text = "The cost is $5 (approx.) per seat."
    [row] = query(run, db_path, "select brain_verify(:c, :t) as v", c="  cost is $5 (approx.)  ", t=text)
    result = json.loads(row["v"])
    assert result["supported"] and [text[a:b] for a, b in result["match_ranges"]] == ["cost is $5 (approx"]


def test_verify_empty_claim_is_unsupported(run, db_path):
    run("brain", "init", db_path)
    [row] = query(run, db_path, "select brain_verify('  ', 'anything') as v")
    assert json.loads(row["v"])["decision"] == "unsupported"


def test_fts_query_lexical_spec(run, db_path):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0

    def titles(text):
        return {
            r["title"]
            for r in query(
                run,
                db_path,
                "select distinct k.title from knowledge_fts f join knowledge k on k.id = f.rowid "
                "where knowledge_fts match brain_fts_query(:q)",
                q=text,
            )
        }

    assert titles('"Reciprocal Rank Fusion"') == {"Recall"}
    assert "Recall" not in titles('fusion -"Reciprocal Rank"')
    assert titles("src/main.rs") == {"Lexical Leg"}
    assert titles("the of and") == set()  # nothing to search for matches nothing
    assert titles("pagerank OR NOT") == {"Graph Leg"}


def test_brain_embed_is_normalised_and_deterministic(run, db_path):
    run("brain", "init", db_path)
    result = run(
        "query", db_path, "select hex(brain_embed('memory palace')) as a, hex(brain_embed('memory palace')) as b"
    )
    row = json.loads(result.output)[0]
    assert row["a"] == row["b"]
    vector = np.frombuffer(bytes.fromhex(row["a"]), dtype=np.float32)
    assert vector.shape == (256,)
    assert abs(np.linalg.norm(vector) - 1) < 1e-5


def test_a_refused_argument_is_said_in_sqlite_utils_query(run, db_path):
    """SQLite says only "user-defined function raised exception": the function's one
    line says why, on stderr, as Datasette's log has it (review 102)."""
    run("brain", "init", db_path)
    result = run("query", db_path, "select brain_rrf(0) a")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "brain_sql: brain_rrf: rank must be a whole number from 1 (the best), not 0" in result.output
