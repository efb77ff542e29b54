"""brain_fts_query on a connection prepared by brain_sql: any text, hostile or
random, is a valid FTS5 expression. Through `sqlite-utils query`: test_cli_functions.py."""

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
