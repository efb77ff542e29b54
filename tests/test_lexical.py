"""User text to a safe FTS5 MATCH expression, and FTS5's porter stems of words."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain_sql.config import COMMON_PHRASE_ROWS, MAX_PHRASES
from brain_sql.lexical import MATCH_NOTHING, fts_query, fts_tokens, parse, plan, stems

try:
    from brain_sql.connection import sqlite3
except ImportError:
    import pysqlite3.dbapi2 as sqlite3

DOCS = [
    "the pager alert woke the engineer",
    "a quiet night with no pager",
    "fixed a bug in src/main.rs today",
    "main source is in the rs folder",
    "parse_annotations reads the file",
    "a well known fact",
]


@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("create virtual table docs using fts5(body, tokenize='porter unicode61')")
    conn.executemany("insert into docs (rowid, body) values (?, ?)", list(enumerate(DOCS)))
    yield conn
    conn.close()


def matching(conn, text, common=frozenset()):
    rows = conn.execute("select rowid from docs where docs match ?", (fts_query(text, common),))
    return {DOCS[rowid] for (rowid,) in rows}


def test_parse_splits_terms_phrases_and_exclusions():
    spec = parse('pager "on call" -night -"quiet hours"')
    assert spec.terms == ["pager"]
    assert spec.phrases == [("on", "call")]
    assert spec.exclusions == [("night",), ("quiet", "hours")]
    assert spec.compounds == []


@pytest.mark.parametrize(
    "text, compound",
    [
        ("src/main.rs", ("src", "main", "rs")),
        ("parse_annotations", ("parse", "annotations")),
        ("Foo::bar", ("foo", "bar")),
        ("myApp-config", ("myapp", "config")),  # camelCase makes a joined word code
    ],
)
def test_code_paths_and_identifiers_become_compounds(text, compound):
    spec = parse(text)
    assert (spec.compounds, spec.terms) == ([compound], [])


def test_camel_case_word_alone_is_one_token_as_fts5_sees_it():
    assert parse("camelCase").terms == ["camelcase"]


def test_words_are_cut_where_fts5_cuts_them():
    """U+19B0 is a letter to Python but not to FTS5's Unicode 6.1 tables: the
    word is two tokens to the index, so it is two here, and a lone one is none."""
    assert parse("desk\u19b0zebra").terms == ["desk", "zebra"]
    assert parse("\u19b0").terms == [] and fts_query("\u19b0") == MATCH_NOTHING
    assert parse("Café").terms == ["cafe"]  # folded as the index folds it


def test_hyphenated_words_split_into_terms_without_stopwords():
    assert parse("state-of-the-art well-known").terms == ["state", "art", "well", "known"]


def test_stopwords_are_dropped_from_terms_but_kept_in_phrases():
    spec = parse('the pager is "the pager"')
    assert spec.terms == ["pager"]
    assert spec.phrases == [("the", "pager")]


def test_unclosed_quote_still_makes_a_phrase():
    assert parse('"on call').phrases == [("on", "call")]


def test_terms_match_any_document_containing_one(fts):
    assert matching(fts, "pager engineer") == {DOCS[0], DOCS[1]}


def test_terms_match_porter_stems(fts):
    assert matching(fts, "alerts") == {DOCS[0]}


def test_quoted_phrase_is_required(fts):
    assert matching(fts, 'pager "quiet night"') == {DOCS[1]}


def test_exclusions_remove_matches(fts):
    assert matching(fts, "pager -engineer") == {DOCS[1]}
    assert matching(fts, 'pager -"quiet night"') == {DOCS[0]}


def test_code_path_matches_only_as_a_whole(fts):
    assert matching(fts, "src/main.rs") == {DOCS[2]}
    assert matching(fts, "parse_annotations") == {DOCS[4]}


def test_common_words_are_dropped_while_rarer_ones_remain(fts):
    assert fts_query("pager alert", common={"pager"}) == '"alert"'
    assert matching(fts, "pager alert", common={"pager"}) == {DOCS[0]}


def test_common_words_are_kept_when_nothing_else_remains(fts):
    assert matching(fts, "pager", common={"pager"}) == {DOCS[0], DOCS[1]}


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", "the of and", "-pager", '""', "-", None])
def test_text_with_nothing_to_search_for_matches_nothing(fts, text):
    assert fts_query(text) == MATCH_NOTHING
    assert matching(fts, text) == set()


@pytest.mark.parametrize(
    "text", ['pager" OR "', "NEAR(a b)", "a AND OR NOT", "body:pager", "pag*", "^pager", "(((", 'say ""hi""']
)
def test_fts5_syntax_in_the_text_is_searched_for_not_obeyed(fts, text):
    matching(fts, text)  # raises sqlite3.OperationalError on invalid FTS5


def test_many_items_still_make_a_valid_query(fts):
    text = " ".join(f'-w{i} w{i} "p{i} q{i}"' for i in range(100))
    assert matching(fts, text) == set()


def test_phrases_past_the_limit_are_matched_as_their_words():
    """Each phrase is a read of its words' positions: a query matches MAX_PHRASES of
    them as phrases (quoted, then excluded, then code paths), the others as words,
    so 200 phrases of common words cost what 8 do (review 101: 26 s at 50,000)."""
    quoted = [f"q{i} r{i}" for i in range(MAX_PHRASES + 3)]
    match = plan(" ".join(f'"{p}"' for p in quoted) + ' -"x y" ab.cd.ef')
    assert match.required == tuple(tuple(p.split()) for p in quoted[:MAX_PHRASES])
    assert match.excluded == () and ("ab", "cd", "ef") not in match.any_of
    assert {("q9",), ("r9",), ("ab",), ("cd",), ("ef",)} <= set(match.any_of)
    few = plan('"q0 r0" -"x y" ab.cd.ef')
    assert few.required == (("q0", "r0"),) and few.excluded == (("x", "y"),) and ("ab", "cd", "ef") in few.any_of


def test_a_phrase_of_common_words_only_is_matched_as_its_words_in_a_large_brain():
    """Past COMMON_PHRASE_ROWS reachable rows, a phrase whose every word is common
    reads most of the index (1.2 s for "of the" at a million memories) and tells
    little apart: it is matched as its words, the common ones left out as always.
    A phrase with one rarer word, and any phrase in a smaller brain, stays one."""
    common = {"pager", "alert", "night"}
    big = COMMON_PHRASE_ROWS + 1
    assert plan('"pager alert" quiet', common, big).required == ()
    assert plan('"pager alert" quiet', common, big).any_of == (("quiet",),)
    assert plan('"pager alert" quiet', common, COMMON_PHRASE_ROWS).required == (("pager", "alert"),)
    assert plan('"pager quiet"', common, big).required == (("pager", "quiet"),)
    assert plan('-"pager alert" quiet', common, big).excluded == ()
    assert plan('"pager alert"', common, big).any_of == (("pager",), ("alert",))  # nothing else: kept as words


FTS5_SYNTAX = st.sampled_from(
    ['"', "-", "*", "^", "(", ")", ":", "+", "NEAR", "AND", "OR", "NOT", "src/main.rs", "pager"]
)


@given(st.lists(st.one_of(st.text(max_size=20), FTS5_SYNTAX), max_size=8).map(" ".join))
def test_any_text_is_a_valid_fts5_query(text):
    conn = sqlite3.connect(":memory:")
    conn.execute("create virtual table docs using fts5(body, tokenize='porter unicode61')")
    conn.execute("select rowid from docs where docs match ?", (fts_query(text),)).fetchall()
    conn.close()


def test_stems_are_the_terms_fts5_indexes():
    assert stems(["running", "Runs", "the", "running"]) == {"running": "run", "Runs": "run", "the": "the"}


def test_stems_leave_out_words_with_no_token():
    assert stems(["!!!", "alerts"]) == {"alerts": "alert"}
    assert stems([]) == {}


@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=40), min_size=1, max_size=4))
def test_ascii_text_is_cut_into_the_tokens_fts5s_unicode61_cuts(texts):
    """ASCII text is cut in Python (a query is cut at every recall); what FTS5's own
    tokenizer gives for it, token for token: any other text goes to FTS5 itself."""
    conn = sqlite3.connect(":memory:")
    conn.execute("create virtual table plain using fts5(text, tokenize='unicode61', content='')")
    conn.execute("create virtual table plain_terms using fts5vocab(plain, 'instance')")
    conn.executemany("insert into plain (rowid, text) values (?, ?)", list(enumerate(texts)))
    expected = [[] for _ in texts]
    for doc, term in conn.execute("select doc, term from plain_terms order by doc, offset"):
        expected[doc].append(term)
    assert fts_tokens(texts) == expected
    assert fts_tokens([*texts, "Ünïcode café"])[-1] == ["unicode", "cafe"]
