"""brain_verify and brain_fts_query, through `sqlite-utils query` and on real FTS5."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql.connection import sqlite3

from .conftest import VAULT


def query(run, db_path, sql, **params):
    args = ["query", db_path, sql]
    for name, value in params.items():
        args += ["-p", name, value]
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


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
                run, db_path,
                "select distinct k.title from knowledge_fts f join knowledge k on k.id = f.rowid "
                "where knowledge_fts match brain_fts_query(:q)", q=text,
            )
        }  # fmt: skip

    assert titles('"Reciprocal Rank Fusion"') == {"Recall"}
    assert "Recall" not in titles('fusion -"Reciprocal Rank"')
    assert titles("src/main.rs") == {"Lexical Leg"}
    assert titles("the of and") == set()  # nothing to search for matches nothing
    assert titles("pagerank OR NOT") == {"Graph Leg"}


HOSTILE = ['"', '""', "-", '-"', "NOT", "AND OR NOT NEAR", "title:x", "x*", "^x", "(((", ")",
           "NEAR(a b, 3)", "a:b:c", "{title content}: x", "\x00", "'; drop table knowledge; --",
           "ｆｕｌｌ　ｗｉｄｔｈ", "emoji 🧠 brain", "-\"unterminated", "a\"b\"c\"d"]  # fmt: skip


def fts_connection():
    conn = sqlite3.connect(":memory:")
    brain_sql.prepare_connection(conn)
    conn.execute("create virtual table f using fts5(title, content, tokenize='porter unicode61')")
    conn.execute("insert into f values ('brain', 'a memory palace for agents')")
    return conn


def test_fts_query_hostile_inputs_never_raise():
    conn = fts_connection()
    for text in HOSTILE:
        conn.execute("select count(*) from f where f match brain_fts_query(?)", (text,)).fetchone()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fts_query_any_text_is_valid_fts5(text):
    conn = fts_connection()
    conn.execute("select count(*) from f where f match brain_fts_query(?)", (text,)).fetchone()
