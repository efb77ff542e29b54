"""brain_fts_query on a connection prepared by brain_sql: any text, hostile or
random, is a valid FTS5 expression; every brain_* function bounds its arguments.
Through `sqlite-utils query`: test_cli_functions.py."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql.connection import sqlite3

HOSTILE = [
    '"',
    '""',
    "-",
    '-"',
    "NOT",
    "AND OR NOT NEAR",
    "title:x",
    "x*",
    "^x",
    "(((",
    ")",
    "NEAR(a b, 3)",
    "a:b:c",
    "{title content}: x",
    "\x00",
    "'; drop table knowledge; --",
    "ｆｕｌｌ　ｗｉｄｔｈ",
    "emoji 🧠 brain",
    '-"unterminated',
    'a"b"c"d',
]


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


def test_every_brain_function_refuses_an_argument_past_its_bound(conn, capsys):
    """Datasette's SQL time limit stops a query between SQLite's steps, never inside
    a Python function: every brain_* function registered, given a text larger than
    any request may send in any place, refuses it before working on it (and says so
    in one line: the function's name and what is wrong)."""
    functions = conn.execute("select name, narg from pragma_function_list where name like 'brain\\_%' escape '\\'")
    calls = [
        (name, [None] * position + ["a" * 1_100_001] + [None] * (count - position - 1))
        for name, narg in sorted(set(functions))
        for count in ([narg] if narg >= 0 else range(1, 5))
        for position in range(count)
    ]
    assert {name for name, _ in calls} >= {"brain_verify", "brain_embed", "brain_ppr", "brain_dialogue", "brain_k"}
    # on, as Datasette turns it on when imported (sqlite3 has no way to read it back, so
    # it is left on: a test after this one may rely on Datasette's setting)
    sqlite3.enable_callback_tracebacks(True)
    for name, args in calls:
        with pytest.raises(sqlite3.OperationalError):
            conn.execute(f"select {name}({', '.join('?' * len(args))})", args).fetchone()
        err = capsys.readouterr().err
        assert f"brain_sql: {name}" in err and "Traceback" not in err, (name, len(args), err[:300])


def test_a_brain_function_cut_by_a_time_limit_says_so_not_that_the_brain_is_none(vault_brain_copy, capsys):
    """Datasette's SQL time limit (a progress handler) cut a brain_* function's own
    queries, and the line logged said the brain was no brain (review 106, F3). It
    says a time limit stopped it; the statement fails, never a NULL in place of hits."""
    conn = brain_sql.connect(vault_brain_copy)
    sqlite3.enable_callback_tracebacks(True)
    conn.set_progress_handler(lambda: 1, 1000)  # past the limit from the function's first long query on
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("select brain_fts('support runbook', null)").fetchall()
    err = capsys.readouterr().err
    assert "brain_sql: brain_fts: interrupted: a time limit stopped the statement calling it" in err, err
    assert "not one" not in err and "Traceback" not in err, err
    conn.set_progress_handler(None, 0)
    assert conn.execute("select json_array_length(brain_fts('support runbook', null)) > 0").fetchone() == (1,)
