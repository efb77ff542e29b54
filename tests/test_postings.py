"""The lexical leg's postings: the terms FTS5 indexes a row under, to the term;
BM25 equal to FTS5's bm25() to the bit, and to bm25.search (over the rows a
request can reach) when rows are hidden or the match has AND, NOT or phrases;
MaxScore returning exactly what scoring every matching row returns; and
postings that followed additions and rewrites searching as a fresh build."""

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql import bm25, lexical
from brain_sql import postings as postings_module
from brain_sql.config import FTS_COLUMN_WEIGHTS
from brain_sql.connection import sqlite3
from brain_sql.postings import BLOCK_BITS, Postings
from brain_sql.reach import Reach
from brain_sql.schema import fts_length

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "data" / "beir_corpus_sample.jsonl"
SCIFACT = next(
    (p / "shared" / "data" / "scifact" for p in HERE.parents if (p / "shared" / "data" / "scifact").exists()), None
)
BM25_SQL = (
    f"select rowid, bm25(knowledge_fts, {', '.join(map(str, FTS_COLUMN_WEIGHTS))}) s from knowledge_fts "
    "where knowledge_fts match ? order by s, rowid limit ?"
)
SLOW_EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters FTS5's unicode61 treats in every way it can: ASCII letters, digits and
# separators, letters with diacritics and their combining marks, case pairs that
# change length, ligatures, other numbers, private use, CJK, emoji and modifiers,
# non-ASCII separators and joiners.
PIECES = list("aAbBzZyY09 _-.,'\"/\\\t\n\x00") + [
    "é",
    "É",
    "ß",
    "ẞ",
    "İ",
    "ı",
    "ﬁ",
    "ǅ",
    "Ⅻ",
    "²",
    "½",
    "٣",
    "５",
    "Ａ",
    "\u0301",
    "\u0308",
    "\u200d",
    "\u00a0",
    "\u2013",
    "\u2014",
    "’",
    "“",
    "α",
    "Ω",
    "ж",
    "中文",
    "日本",
    "😀",
    "👍🏽",
    "\ue000",
    "\U0001d400",
    "ing",
    "ies",
    "ational",
    "running",
    "Connection",
    "immunohistochemistry",
    "x" * 70,
    "7" * 40,
    "abc1s",
]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.characters(blacklist_categories=("Cs",))), max_size=60).map(
    "".join
)
rows_of_texts = st.lists(st.tuples(st.none() | texts, st.none() | texts, st.none() | texts), min_size=1, max_size=8)


def fts_brain(rows):
    """An in-memory knowledge_fts (as schema.py makes it), with its vocabulary tables,
    holding `rows` (title, content, context) at rowids 1, 2, ..."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "create virtual table knowledge_fts using fts5(title, content, context, content_hash UNINDEXED, "
        "tokenize='porter unicode61')"
    )
    conn.execute("create virtual table knowledge_fts_vocab using fts5vocab(knowledge_fts, 'instance')")
    conn.execute("create virtual table knowledge_fts_terms using fts5vocab(knowledge_fts, 'row')")
    conn.executemany(
        "insert into knowledge_fts (rowid, title, content, context) values (?, ?, ?, ?)",
        [(i + 1, *row) for i, row in enumerate(rows)],
    )
    return conn


def fts_indexed(conn):
    """{rowid: ({term: weighted occurrences}, docsize tokens)} as FTS5 holds them."""
    weight = dict(zip(("title", "content", "context"), FTS_COLUMN_WEIGHTS))
    held = {rowid: ({}, fts_length(size)) for rowid, size in conn.execute("select id, sz from knowledge_fts_docsize")}
    for term, doc, col in conn.execute("select cast(term as blob), doc, col from knowledge_fts_vocab"):
        term = lexical.term_text(term)
        held[doc][0][term] = held[doc][0].get(term, 0) + weight[col]
    return held


class Brain:
    """FTS5 rows and Postings of the same rows: slot i holds rowid ids[i]."""

    def __init__(self, conn):
        self.conn = conn
        found = conn.execute("select rowid, title, content, context from knowledge_fts order by rowid").fetchall()
        self.ids = np.array([row[0] for row in found], dtype=np.int64)
        self.postings = Postings()
        self.lengths = self.postings.add(np.arange(len(found)), [row[1:] for row in found])
        self.vocabulary = sorted(
            {w for row in found for text in row[1:] if text for w in lexical.fts_tokens([text])[0]}
        )

    def ours(self, match, visible=None, n=100, prune=True):
        visible = np.ones(len(self.ids), dtype=bool) if visible is None else visible
        found = self.postings.search(
            match, visible, self.lengths, n, order=self.ids, phrase_postings=self.phrase_postings, prune=prune
        )
        return [(int(self.ids[slot]), score) for slot, score in found]

    def phrase_postings(self, words):
        totals = bm25.phrase_occurrences(self.conn, words)
        return np.searchsorted(self.ids, list(totals)), list(totals.values())

    def fts5(self, match, n=100):
        return [tuple(row) for row in self.conn.execute(BM25_SQL, [match.expression(), n])]

    def reach(self, match, visible, n=100):
        """bm25.search over the Reach of `visible`."""
        reach = Reach(self.ids[visible], self.lengths[visible], total=len(self.ids))
        return bm25.search(bm25.TermStats(self.conn, reach), match, n)


def read_rows(path, count):
    rows = []
    for line in open(path):
        record = json.loads(line)
        rows.append((record.get("title"), record.get("text"), None))
        if len(rows) == count:
            break
    return rows


@pytest.fixture(scope="module")
def vault(vault_brain_path):
    conn = sqlite3.connect(f"file:{vault_brain_path}?mode=ro", uri=True)
    yield Brain(conn)
    conn.close()


@pytest.fixture(scope="module")
def scifact():
    rows = read_rows(SCIFACT / "corpus.jsonl", 1500) if SCIFACT else read_rows(SAMPLE, 25)
    conn = fts_brain(rows)
    yield Brain(conn)
    conn.close()


def queries(brain, count, seed):
    """Texts of optional words from the brain's own words (and one it lacks)."""
    rng = random.Random(seed)
    return [" ".join(rng.sample(brain.vocabulary, rng.randint(1, 6)) + ["zzyzx"] * (i % 7 == 0)) for i in range(count)]


# -- the terms -------------------------------------------------------------------------


@given(rows_of_texts)
@settings(max_examples=300, deadline=None)
def test_index_terms_is_what_fts5_indexes(rows):
    conn = fts_brain(rows)
    found = lexical.index_terms(rows, FTS_COLUMN_WEIGHTS)
    expected = fts_indexed(conn)
    assert [(held, int(tokens)) for held, tokens in zip(found.by_row(), found.tokens)] == [
        expected[i + 1] for i in range(len(rows))
    ]


def test_index_terms_of_tokens_fts5_cuts_short_or_leaves_unstemmed():
    rows = [("x" * 40000 + " " + "Connectings" * 7, "é" * 20000 + "ing " + "ab" * 17 + " 123s 0.5%", None)]
    expected = fts_indexed(fts_brain(rows))[1]
    found = lexical.index_terms(rows, FTS_COLUMN_WEIGHTS)
    assert (found.by_row()[0], int(found.tokens[0])) == expected
    assert "x" * 32768 in expected[0]


def test_index_terms_when_the_run_cache_overflows(monkeypatch):
    monkeypatch.setattr(lexical, "RUN_CACHE", 3)
    rows = read_rows(SAMPLE, 25)
    expected = fts_indexed(fts_brain(rows))
    found = lexical.index_terms(rows, FTS_COLUMN_WEIGHTS)
    assert [(held, int(tokens)) for held, tokens in zip(found.by_row(), found.tokens)] == [
        expected[i + 1] for i in range(len(rows))
    ]


# -- scores equal to FTS5's bm25() when nothing is hidden -------------------------------


def test_lengths_are_fts5s_docsizes(vault, scifact):
    for brain in (vault, scifact):
        sizes = dict(brain.conn.execute("select id, sz from knowledge_fts_docsize"))
        assert brain.lengths.tolist() == [fts_length(sizes[i]) for i in brain.ids.tolist()]


def test_scores_are_fts5s_bm25_on_the_vault_brain(vault):
    for text in queries(vault, 150, seed=1) + ["support team staff", "pager vendor escalations", "the"]:
        match = lexical.plan(text)
        assert vault.ours(match) == vault.fts5(match), text


def test_scores_are_fts5s_bm25_on_scifact(scifact):
    texts = queries(scifact, 100, seed=2)
    if SCIFACT:
        texts += [json.loads(line)["text"] for line in open(SCIFACT / "queries.jsonl")][:200]
    for text in texts:
        match = lexical.plan(text)
        for n in (100, 10):
            assert scifact.ours(match, n=n) == scifact.fts5(match, n=n), text


@given(
    st.lists(
        st.lists(st.sampled_from("alpha beta gamma delta pager vendor team support x y".split()), max_size=30),
        min_size=1,
        max_size=30,
    ),
    st.lists(
        st.sampled_from("alpha beta gamma delta pager vendor team support nothing".split()), min_size=1, max_size=5
    ),
    st.integers(1, 12),
    st.integers(0, 400),
)
@SLOW_EXAMPLES
def test_scores_are_fts5s_bm25_on_random_texts(words, query, n, repeated):
    rows = [(" ".join(w[:3]), " ".join(w[3:]), " ".join(w[::2]) or None) for w in words]
    rows[0] = (("pager " * repeated) or None, rows[0][1], rows[0][2])  # a weight beyond one byte
    brain = Brain(fts_brain(rows))
    match = lexical.plan(" ".join(query))
    assert brain.ours(match, n=n) == brain.fts5(match, n=n)


@given(rows_of_texts, st.data())
@SLOW_EXAMPLES
def test_scores_are_fts5s_bm25_on_texts_of_any_characters(rows, data):
    brain = Brain(fts_brain(rows))
    words = brain.vocabulary + ["nothing"]
    query = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=5))
    match = lexical.Match(any_of=tuple((word,) for word in dict.fromkeys(query)))
    n = data.draw(st.integers(1, 10))
    assert brain.ours(match, n=n) == brain.fts5(match, n=n)


# -- statistics over the visible rows, AND, NOT and phrases --------------------------------


def match_texts(brain, count, seed):
    """Query texts with quoted phrases (two words a row holds one after another), exclusions and terms."""
    rng = random.Random(seed)
    found = brain.conn.execute("select content from knowledge_fts").fetchall()
    texts = []
    for _ in range(count):
        words = lexical.fts_tokens([rng.choice(found)[0] or "x"])[0] or ["x"]
        at = rng.randrange(len(words))
        parts = rng.sample(brain.vocabulary, rng.randint(0, 3))
        for _ in range(rng.choice([0, 1, 1, 2])):
            at = rng.randrange(len(words))
            parts.append('"' + " ".join(words[at : at + 2]) + '"')
        if rng.random() < 0.4:
            parts.append("-" + rng.choice(brain.vocabulary))
        if rng.random() < 0.3:
            parts.append("-" + '"' + " ".join(words[at : at + 2]) + '"')
        rng.shuffle(parts)
        texts.append(" ".join(parts) or "x")
    return texts


@pytest.mark.parametrize("share_hidden", [0.0, 0.002, 0.1, 0.6])
def test_scores_are_bm25_searchs_over_the_visible_rows(vault, scifact, share_hidden):
    for brain in (vault, scifact):
        rng = np.random.default_rng(3)
        visible = rng.random(len(brain.ids)) >= share_hidden
        for text in queries(brain, 40, seed=4) + match_texts(brain, 60, seed=5):
            match = lexical.plan(text)
            assert brain.ours(match, visible) == brain.reach(match, visible), text


def test_a_phrase_fts5_finds_no_token_in_matches_nothing(vault):
    match = lexical.Match(any_of=(("pager",), ("\u2013",), ("team",)))
    assert vault.ours(match) == vault.fts5(match) != []
    assert vault.ours(lexical.Match(any_of=(("\u2013",),))) == []


def _instances(conn, words):
    """{row id: weighted occurrences} of the phrase, counted from each of its terms'
    instances (fts5vocab 'instance'): the reference phrase_occurrences answers as."""
    terms = lexical.phrase_terms(words)
    at = {}
    for i, term in enumerate(terms):
        found = conn.execute(
            'select doc, col, "offset" from knowledge_fts_vocab where term = cast(? as text)',
            [lexical.term_bytes(term)],
        )
        at[i] = {(doc, col, offset - i) for doc, col, offset in found}
    starts = set.intersection(*at.values()) if terms else set()
    weight = dict(zip(("title", "content", "context"), FTS_COLUMN_WEIGHTS))
    totals = {}
    for doc, col, _ in starts:
        totals[doc] = totals.get(doc, 0.0) + weight[col]
    return totals


def test_a_phrases_occurrences_are_those_of_its_terms_one_after_another(scifact):
    """phrase_occurrences solves FTS5's bm25 of the phrase for each row's weighted
    occurrences: exactly what counting its terms' instances one after another in
    a column gives, for rare and common words, long phrases and overlapping ones,
    and for the rows a caller keeps (their lengths its own)."""
    rng = random.Random(8)
    found = scifact.conn.execute("select content from knowledge_fts").fetchall()
    phrases = []
    for _ in range(40):
        words = lexical.fts_tokens([rng.choice(found)[0] or "x"])[0] or ["x"]
        at = rng.randrange(len(words))
        phrases.append(tuple(words[at : at + rng.randint(2, 9)]))
    phrases += [("the", "of", "the"), ("of", "the", "of", "the"), ("of", "the"), ("in", "the", "present", "study")]
    phrases.append(tuple(lexical.fts_tokens([found[3][0]])[0][:70]))  # longer than SQLite joins tables
    whole = [bm25.phrase_occurrences(scifact.conn, words) for words in phrases]
    assert sum(map(len, whole)) > 500 and max(max(t.values(), default=0) for t in whole) > 3
    assert whole == [_instances(scifact.conn, words) for words in phrases]
    kept = set(scifact.ids[::3].tolist())
    lengths = dict(zip(scifact.ids.tolist(), scifact.lengths.tolist()))

    def lengths_of(ids):
        mask = np.array([i in kept for i in ids.tolist()], dtype=bool)
        return mask, np.array([lengths[i] for i in ids[mask].tolist()])

    for words, totals in zip(phrases, whole):
        assert bm25.phrase_occurrences(scifact.conn, words, lengths_of) == {
            i: f for i, f in totals.items() if i in kept
        }
    # FTS5 records its totals at commit: inside a transaction they are summed from the docsizes
    assert scifact.conn.in_transaction
    summed = bm25.fts_totals(scifact.conn)
    scifact.conn.commit()
    assert bm25.fts_totals(scifact.conn) == summed
    assert [bm25.phrase_occurrences(scifact.conn, words) for words in phrases] == whole


def test_rows_holding_a_term_are_counted_over_the_visible_rows(scifact):
    rng = np.random.default_rng(6)
    visible = rng.random(len(scifact.ids)) >= 0.3
    visible_ids = set(scifact.ids[visible].tolist())
    stems = lexical.stems(scifact.vocabulary[::25])
    counts = scifact.postings.frequencies(stems.values(), visible)
    for word, stem in stems.items():
        rowids = {
            r
            for (r,) in scifact.conn.execute(
                "select rowid from knowledge_fts where knowledge_fts match ?", [f'"{word}"']
            )
        }
        assert counts[stem] == len(rowids & visible_ids) == scifact.postings.rows_holding(stem, visible)


# -- MaxScore ------------------------------------------------------------------------------


@given(st.data())
@SLOW_EXAMPLES
def test_max_score_returns_what_scoring_every_row_returns(scifact, data):
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    visible = np.array([rng.random() >= data.draw(st.sampled_from([0.0, 0.2, 0.7])) for _ in scifact.ids])
    text = rng.choice(queries(scifact, 3, seed=rng.random()) + match_texts(scifact, 3, seed=rng.random()))
    n = data.draw(st.sampled_from([1, 2, 5, 20, 100]))
    match = lexical.plan(text)
    assert scifact.ours(match, visible, n) == scifact.ours(match, visible, n, prune=False)


# -- following writes --------------------------------------------------------------------


def test_postings_that_followed_writes_search_as_a_fresh_build():
    """Rows added a few at a time at slots spread over several blocks, some rewritten
    (hidden at their old slot, added again at a new one), search as postings built
    at once from the rows as they are; compacted, they are that build."""
    rows = read_rows(SAMPLE, 25) * 4
    rng = random.Random(7)
    followed, current, slot = Postings(), {}, 0
    lengths = {}
    for start in range(0, len(rows), 7):
        batch = list(range(start, min(start + 7, len(rows))))
        if start and rng.random() < 0.8:  # rewrite a few earlier rows
            batch += rng.sample(range(start), 3)
        texts = [(f"v{slot + i} " + (rows[r][0] or ""), rows[r][1], None) for i, r in enumerate(batch)]
        at = np.arange(slot, slot + len(batch)) * 3011  # gaps: rows fall in several blocks
        for r, s, text, length in zip(batch, at.tolist(), texts, followed.add(at, texts)):
            current[r] = (s, text)
            lengths[s] = length
        slot += len(batch)
    assert int(at[-1]) >> BLOCK_BITS >= 3
    live = sorted(current.values())
    size = followed.size
    visible = np.zeros(size, dtype=bool)
    visible[[s for s, _ in live]] = True
    all_lengths = np.zeros(size, dtype=np.int64)
    all_lengths[list(lengths)] = list(lengths.values())
    ids = np.arange(size)  # rowid = slot
    fresh = Postings()
    fresh_lengths = fresh.add(np.arange(len(live)), [text for _, text in live])
    fresh_ids = np.array([s for s, _ in live])
    conn = fts_brain([])
    conn.executemany(
        "insert into knowledge_fts (rowid, title, content, context) values (?, ?, ?, ?)",
        [(s, *text) for s, text in live],
    )

    def phrase_postings(words):  # rowid = slot in `followed`
        totals = bm25.phrase_occurrences(conn, words)
        return np.array(list(totals), dtype=np.int64), list(totals.values())

    def fresh_phrase_postings(words):
        slots, frequencies = phrase_postings(words)
        return np.searchsorted(fresh_ids, slots), frequencies

    everything = np.ones(len(live), dtype=bool)
    for text in [
        "cerebral white matter",
        "diffusion",
        "v3 v77 anisotropy",
        "brain cortex development",
        '"white matter" -zebrafish',
        'development -"white matter"',
        'diffusion "magnetic resonance"',
    ]:
        match = lexical.plan(text)
        for n in (3, 100):
            theirs = fresh.search(match, everything, fresh_lengths, n, fresh_ids, phrase_postings=fresh_phrase_postings)
            ours = followed.search(match, visible, all_lengths, n, ids, phrase_postings=phrase_postings)
            assert ours == [(int(fresh_ids[s]), score) for s, score in theirs] and ours, text
    slot_of = np.full(size, -1)
    slot_of[[s for s, _ in live]] = np.arange(len(live))
    compacted = followed.compacted(slot_of, fresh_lengths)
    assert compacted.size == fresh.size
    assert arrays_equal(compacted, fresh)
    assert arrays_equal(Postings.from_arrays(followed.to_arrays()), followed)


@pytest.mark.parametrize("colliding", [False, True])
def test_postings_loaded_from_arrays_search_and_follow_as_the_ones_saved(monkeypatch, colliding):
    """Loaded from a snapshot's arrays, the terms are found by their hashes and bytes
    (also when every hash is the same), a term FTS5 cut inside a character among
    them; rows added after loading number new terms after the loaded ones and
    search as the same rows added to the postings saved."""
    if colliding:
        monkeypatch.setattr(postings_module, "_hash", lambda spelled: 7)
    rows = read_rows(SAMPLE, 40)
    saved = Postings()
    saved.add(np.arange(len(rows)), rows)
    saved.vocabulary.number(lexical.term_text(b"caf\xc3"))  # as FTS5's stemmer may cut "café"
    loaded = Postings.from_arrays(saved.to_arrays())
    assert list(loaded.vocabulary.items()) == list(saved.vocabulary.items())
    assert all(loaded.vocabulary.get(term) == number for term, number in saved.vocabulary.items())
    assert loaded.vocabulary.get("zzyzx") == -1
    more = [("zzyzx quokka " + (title or ""), content, None) for title, content, _ in rows[:5]]
    for p in (saved, loaded):
        p.add(np.arange(len(rows), len(rows) + 5), more)
    assert list(loaded.vocabulary.items()) == list(saved.vocabulary.items())
    visible, lengths = np.ones(saved.size, dtype=bool), np.ones(saved.size)
    for text in ["zzyzx", "quokka diffusion", "white matter", "cortex -zzyzx"]:
        assert loaded.search(lexical.plan(text), visible, lengths, 10) == saved.search(
            lexical.plan(text), visible, lengths, 10
        )
    again = Postings.from_arrays(loaded.to_arrays())
    assert arrays_equal(again, saved) and again.vocabulary.get("zzyzx") == saved.vocabulary.get("zzyzx") >= 0


def test_slots_must_ascend_and_visible_must_cover_them():
    postings = Postings()
    assert postings.add([], []).tolist() == []
    postings.add([3, 5], [("a b", "c", None), (None, "b", "d")])
    for slots in ([5], [7, 6], [8, 8]):
        with pytest.raises(ValueError):
            postings.add(slots, [("x", None, None)] * len(slots))
    with pytest.raises(ValueError):
        postings.search(lexical.plan("b"), np.ones(5, dtype=bool), np.ones(5), 10)
    found = postings.search(lexical.plan("b"), np.ones(6, dtype=bool), np.array([0, 0, 0, 3, 0, 2]), 10)
    fts = fts_brain([(None, None, None)] * 3 + [("a b", "c", None), (None, None, None), (None, "b", "d")])
    assert [(slot + 1, score) for slot, score in found] == [tuple(r) for r in fts.execute(BM25_SQL, ['"b"', 10])]


def arrays_equal(a, b):
    """The same terms holding the same postings."""
    spelled_a = {number: term for term, number in a.vocabulary.items()}
    spelled_b = {number: term for term, number in b.vocabulary.items()}

    def postings(p, spelled):
        found = set()
        for seg in p.segments:
            term, slot, units = seg.postings()
            found |= {(spelled[t], s, u) for t, s, u in zip(term.tolist(), slot.tolist(), units.tolist())}
        return found

    return postings(a, spelled_a) == postings(b, spelled_b)


def test_a_term_fts5_stems_inside_a_character_is_recalled(tmp_path):
    """FTS5's porter stemmer may cut a private-use character in two, so an index term
    need not be UTF-8: recall finds such a memory, from the read state's postings
    and from SQL inside a transaction alike, and its statistics count it."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.remember(conn, [{"_id": "odd", "text": "a\ue000ing gadget"}, {"_id": "plain", "text": "a gadget"}])
    hits = brain_sql.recall(conn, {"q": "a\ue000ing", "cutoff": False})["hits"]
    assert hits and hits[0]["external_id"] == "odd"
    conn.execute("begin")
    try:
        assert brain_sql.recall(conn, {"q": "a\ue000ing", "cutoff": False})["hits"][0]["external_id"] == "odd"
    finally:
        conn.execute("rollback")


def test_looking_up_many_terms_at_once_finds_what_one_at_a_time_finds():
    """Terms.lookup (a refresh's many terms at once) answers as get does, for terms
    stored in a snapshot's table, terms added since, and terms never seen."""
    from brain_sql.postings import Terms

    rng = random.Random(4)
    words = [f"w{rng.randrange(10**6)}" for _ in range(400)] + ["naïve", "ünïcode", "a", "zz"]
    terms = Terms()
    for word in words[:300]:
        terms.number(word)
    terms = Terms.from_arrays(terms.to_arrays())
    for word in words[300:350]:
        terms.number(word)
    asked = words + ["never", "seen", "w"]
    assert terms.lookup(asked).tolist() == [terms.get(word) for word in asked]
    assert sorted(n for n in terms.lookup(asked).tolist() if n >= 0) == list(range(len(set(words[:350]))))


def test_a_phrases_scores_and_the_totals_it_is_solved_with_are_of_one_snapshot(tmp_path, monkeypatch):
    """Another writer's commit between FTS5's bm25 of a phrase and the read of its
    totals solved every occurrence to 0 (review 103 M1: a floored idf read against
    one more row). Both are read in one snapshot; and an averages record plain SQL
    damaged is named, inside a transaction too, never a NaN score."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    records = [
        {"_id": f"r{i}", "text": ("zz yy " * (1 + i % 3) if i % 2 == 0 else "") + f"filler w{i}"} for i in range(200)
    ]
    brain_sql.remember(conn, records)

    def scores():
        return json.loads(conn.execute("select brain_fts(?, '{}')", ['"zz yy"']).fetchone()[0])[:5]

    quiet = scores()
    other = brain_sql.connect(path)
    read = bm25._recorded_totals
    written = []

    def racing(c):
        if not written:
            written.append(brain_sql.remember(other, [{"_id": "late", "text": "stored by another writer meanwhile"}]))
        return read(c)

    monkeypatch.setattr(bm25, "_recorded_totals", racing)
    assert scores() == quiet and written
    monkeypatch.setattr(bm25, "_recorded_totals", read)
    # review 104: a statement that writes may call it, on a connection whose read state is built or
    # not yet (then built under it): each opened a transaction it could not end, and later writes were lost
    conn.execute("create table saved (j)")
    conn.execute("insert into saved select brain_fts(?, '{}')", ['"zz yy"'])
    assert not conn.in_transaction
    conn.execute("pragma wal_checkpoint(truncate)")  # the next process reads the file as it is
    statement = "insert into saved select brain_fts('\"zz yy\"', '{}')"
    script = (
        f"import brain_sql; c = brain_sql.connect({str(path)!r}); c.execute({statement!r}); print(c.in_transaction)"
    )
    fresh = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert fresh.stdout.strip() == "False", fresh.stdout + fresh.stderr
    brain_sql.remember(other, [{"_id": "after", "text": "another writer is not locked out"}])
    saved = [json.loads(j) for (j,) in conn.execute("select j from saved")]
    assert len(saved) == 2 and saved[0] and not conn.in_transaction
    conn.execute("update knowledge_fts_data set block = x'05' where id = 1")
    conn.execute("begin")
    with pytest.raises(sqlite3.OperationalError):
        scores()
    with pytest.raises(brain_sql.BrainError, match="the full-text index is damaged"):
        bm25.phrase_occurrences(conn, ("zz", "yy"))
    conn.execute("rollback")
