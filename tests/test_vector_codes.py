"""The vector leg's first pass over sign codes (vector_codes.py): the codes follow
every write and equal a fresh build's, the filters act inside the first pass (a
hidden chunk is never found, a visible one is found however many nearer chunks
are hidden), a followed state and a rebuilt one answer the same, the codes live in
the snapshot, and the first pass finds the exact scan's ten nearest on SciFact."""

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql import chunk_index, querydoc, snapshot, state, vector_codes
from brain_sql.config import MAX_REMEMBER_RECORDS
from brain_sql.embed import embed
from brain_sql.filters import Filters
from brain_sql.hybrid import vector_leg
from brain_sql.vectors import quantize_int8

from .test_snapshot import notes, reopen
from .test_state import MODEL, filters, writes

HERE = Path(__file__).resolve().parent
SCIFACT = next(
    (p / "shared" / "data" / "scifact" for p in HERE.parents if (p / "shared" / "data" / "scifact").exists()), None
)
SAMPLE = HERE / "data" / "beir_corpus_sample.jsonl"


@pytest.fixture
def codes_at(monkeypatch):
    """Make the first pass run on small brains, with a shortlist of `shortlist`."""

    def force(shortlist, factor=0.0):
        monkeypatch.setenv("BRAIN_VECTOR_CODES", "on")
        monkeypatch.setattr(chunk_index, "VECTOR_CODES_MIN_VISIBLE", 0)
        monkeypatch.setattr(chunk_index, "VECTOR_CODES_MIN_SHORTLIST", shortlist)
        monkeypatch.setattr(chunk_index, "VECTOR_CODES_SHORTLIST_FACTOR", factor)

    return force


def query(text):
    return quantize_int8(embed([text], MODEL))[0].tobytes()


def scoped(scope=None):
    """The filters of a request in `scope` (which sees it and its ancestors), or of one in none (sees all)."""
    return Filters.from_querydoc(querydoc.parse({"q": "x", **({"scope": scope} if scope else {})}))


def test_codes_follow_writes_and_equal_a_fresh_build(tmp_path, monkeypatch):
    """After every write the followed codes (and the centre they are taken
    around) are those a build makes; writes move the centre a few dimensions at
    a time, and the codes follow them, the state not built anew."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes(tmp_path / "start", 0, 30)])
    followed = state.current(conn, 256)
    builds = []
    original = state.ReadState.build
    monkeypatch.setattr(state.ReadState, "build", lambda self, c: builds.append(1) or original(self, c))
    moved = []
    for count, kind in enumerate(writes(random.Random(5), conn, tmp_path), 1):
        before = followed.chunks.signs.center.copy()
        assert state.current(conn, 256) is followed
        fresh = original(state.ReadState(256), conn)
        assert followed.fingerprint()["signs"] == fresh.fingerprint()["signs"], (count, kind)
        moved.append(int((followed.chunks.signs.center != before).sum()))
        if count == 20:
            break
    assert len(builds) <= 3  # followed from the log (a compaction may rebuild once in a while)
    assert any(0 < n <= 256 // 8 for n in moved), moved  # some writes moved a few columns of every code


@pytest.mark.parametrize("visible_others", [40, 400], ids=["gathered", "masked"])
def test_the_filters_act_inside_the_first_pass(tmp_path, codes_at, visible_others):
    """Hundreds of chunks nearer the query than any visible one are hidden by a
    scope; the first pass's shortlist holds ten: it is cut among the visible
    chunks, so the visible chunk nearest the query is found, and no hidden one is.
    With few chunks visible they are gathered first, with many the hidden are
    masked out of every chunk's estimate: both ways."""
    codes_at(10)
    conn = brain_sql.connect(tmp_path / "brain.db")
    near = "The pager rota escalation runbook is owned by the support team."
    brain_sql.remember(
        conn,
        [{"_id": f"h{i}", "text": f"{near} Copy {i}.", "scope": "/hidden"} for i in range(300)]
        + [{"_id": "seen", "text": "Escalation of the pager rota: the support runbook owner.", "scope": "/seen"}]
        + [
            {"_id": f"o{i}", "text": f"Lunch menu {i}: soup, bread and cheese.", "scope": "/seen"}
            for i in range(visible_others)
        ],
    )
    seen = conn.execute("select id from knowledge where scope = '/seen' and content like 'Escalation%'").fetchone()[0]
    hidden = {row[0] for row in conn.execute("select id from knowledge where scope = '/hidden'")}
    current = state.current(conn, 256)
    with current.lock:
        found = current.chunks.nearest(query(near), current.chunks.visible(scoped("/seen")), 5)
        everywhere = current.chunks.nearest(query(near), current.chunks.visible(scoped()), 5)
    assert found[0] == tuple(vector_leg(conn, query(near), scoped("/seen"), n=1)[0])
    assert found[0][0] == seen
    assert not {i for i, _ in found} & hidden
    assert everywhere and {i for i, _ in everywhere} <= hidden  # the hidden chunks are the nearest when seen


def test_a_followed_state_and_a_rebuilt_one_answer_the_same(brain_with_copies, tmp_path, codes_at):
    """The first pass picks each chunk by its own code and cuts after every chunk as
    near as the last it keeps: where chunks sit (a followed state puts rewritten
    ones last) changes nothing, nor do copies of one text straddling the cut."""
    codes_at(12)
    conn = brain_with_copies
    rng = random.Random(3)
    followed = state.current(conn, 256)
    sequence = writes(rng, conn, tmp_path)
    texts = ["pager escalation", "The pager rota changes on Mondays.", "who owns the runbook", "backup audit"]
    for round_ in range(8):
        followed = state.current(conn, 256)
        fresh = state.ReadState(256).build(conn)
        for text in texts:
            for _ in range(3):
                chosen = filters(rng)
                with followed.lock:
                    answer = followed.chunks.nearest(query(text), followed.chunks.visible(chosen), 5)
                assert answer == fresh.chunks.nearest(query(text), fresh.chunks.visible(chosen), 5), (round_, text)
        for _ in range(3):
            next(sequence)


@pytest.fixture
def brain_with_copies(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes(tmp_path / "start", 0, 20)])
    brain_sql.remember(conn, [{"_id": f"d{i}", "text": "The pager rota changes on Mondays."} for i in range(40)])
    return conn


def test_copies_of_one_text_enter_the_shortlist_together(brain_with_copies, codes_at):
    """Forty chunks share one vector, and the shortlist holds twelve: all forty are
    scored, so which of equal distances make the cut is vec0's choice, as in the
    exact scan."""
    codes_at(12)
    conn = brain_with_copies
    current = state.current(conn, 256)
    chosen = scoped()
    for k in (3, 30):
        with current.lock:
            found = current.chunks.nearest(query("pager rota Mondays"), current.chunks.visible(chosen), k)
        assert found == [tuple(row) for row in vector_leg(conn, query("pager rota Mondays"), chosen, n=k)]


@pytest.mark.parametrize("dimension", [100, 256, 384])
def test_the_estimate_is_rabitqs_from_the_bit_planes(dimension):
    """The Hamming distances to the query's four bit planes give what the formula
    gives from the signs themselves: (c·q + |r|²/|r|₁ s·q̃) / |x|, q̃ the query cut to
    4 bits, for codes of any width (padded to whole 64-bit words), and each chunk's
    estimate is the same read alone or among all."""
    rng = np.random.default_rng(dimension)
    vectors = rng.integers(-127, 128, (500, dimension), dtype=np.int8)
    vectors[:, :5] += 60  # a common part, for the centre to take away
    sqnorm = (vectors.astype(np.int64) ** 2).sum(axis=1)
    codes = vector_codes.SignCodes(dimension)
    codes.make(vectors, sqnorm, np.ones(len(vectors), dtype=bool))
    q = rng.integers(-127, 128, dimension, dtype=np.int8)
    cut = 16.0 * ((q.astype(np.int64) + 128) >> 4) - 120
    r = vectors.astype(np.float64) - codes.center
    signs = np.where(r > 0, 1.0, -1.0)
    similarity = (q @ codes.center + (r * r).sum(1) / np.abs(r).sum(1) * (signs @ cut)) / np.sqrt(sqnorm)
    assert np.allclose(codes.estimate(q), -similarity, rtol=1e-5, atol=1e-4)  # lower is nearer
    slots = np.array([3, 1, 499, 250])
    assert np.array_equal(codes.estimate(q, slots), codes.estimate(q)[slots])


@given(
    st.integers(min_value=1, max_value=60_000),
    st.integers(min_value=1, max_value=5_000),
    st.integers(min_value=1, max_value=50),
    st.floats(min_value=0, max_value=0.9),
    st.integers(min_value=0, max_value=2**32 - 1),
)
@settings(max_examples=60, deadline=None)
def test_the_cut_keeps_the_smallest_and_every_equal_one(count, size, levels, hidden, seed):
    """The shortlist is every estimate as small as the size-th smallest, whether a
    sample bounded the search first or not; ties (few distinct values) and the
    hidden (infinite) included."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, levels, count).astype(np.float32)
    values[rng.random(count) < hidden] = np.inf
    size = min(size, int(np.isfinite(values).sum()) or 1)
    expected = np.flatnonzero(values <= np.sort(values)[size - 1])
    assert np.array_equal(chunk_index._smallest(values, size), expected)


def test_with_the_codes_off_the_vector_leg_is_vec0s(brain_with_copies, codes_at, monkeypatch):
    codes_at(5)
    monkeypatch.setenv("BRAIN_VECTOR_CODES", "off")
    conn = brain_with_copies
    current = state.current(conn, 256)
    rng = random.Random(9)
    for text in ("pager escalation", "who owns the runbook", "Lunch"):
        for _ in range(4):
            chosen = filters(rng)
            with current.lock:
                found = current.chunks.nearest(query(text), current.chunks.visible(chosen), 20)
            assert found == [tuple(row) for row in vector_leg(conn, query(text), chosen, n=20)]


@pytest.fixture
def small_snapshots(monkeypatch):
    monkeypatch.setattr(state, "SNAPSHOT_MIN_CHUNKS", 1)
    monkeypatch.setattr(state, "_states", {})


def test_the_snapshot_holds_the_codes(small_snapshots, tmp_path, monkeypatch, codes_at):
    """A snapshot holds the codes, and a state loaded from it answers as the one
    that saved it; a snapshot saved without them (the codes off, or of an earlier
    version) is still loaded, not rebuilt from SQL, and its codes made from its
    vectors are a fresh build's."""
    codes_at(6)
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 30)])
    saved = state.current(conn, 256)
    manifest, arrays = snapshot.load(str(path) + "-brainstate")
    assert manifest["chunks"]["signs"]["center"] == saved.chunks.signs.center.tolist()
    assert "signs.bits" in arrays
    builds = []
    original = state.ReadState.build
    monkeypatch.setattr(state.ReadState, "build", lambda self, c: builds.append(1) or original(self, c))
    loaded = state.current(reopen(path), 256)
    assert builds == []
    assert loaded.fingerprint()["signs"] == saved.fingerprint()["signs"]
    q = query("pager rota of team 7")
    with loaded.lock:
        assert loaded.chunks.nearest(q, loaded.chunks.rows.live, 5) == saved.chunks.nearest(
            q, saved.chunks.rows.live, 5
        )

    monkeypatch.setenv("BRAIN_VECTOR_CODES", "off")
    with loaded.lock:
        loaded.chunks.signs = None
        loaded.save(str(path) + "-brainstate", path)
    assert "signs.bits" not in snapshot.load(str(path) + "-brainstate")[1]
    monkeypatch.setenv("BRAIN_VECTOR_CODES", "on")
    again = state.current(reopen(path), 256)
    assert builds == []
    assert again.fingerprint()["signs"] == original(state.ReadState(256), conn).fingerprint()["signs"]


def sentences(count):
    """Sentences of SciFact's abstracts (of the sample shipped with the tests
    without it), one a record."""
    found = []
    for line in open(SCIFACT / "corpus.jsonl" if SCIFACT else SAMPLE):
        record = json.loads(line)
        found += [s.strip() for s in re.split(r"(?<=\.)\s+", record["text"]) if len(s.strip()) > 20]
        if len(found) >= count:
            break
    return found[:count]


def test_the_first_pass_finds_the_exact_scans_ten_nearest(tmp_path, codes_at):
    """On sentences of SciFact with its claims as queries, the first pass with its
    shortlist grown as by default (with the square root of the visible chunks)
    finds the exact scan's ten nearest, 99% of them, also with half the chunks hidden."""
    codes_at(50, chunk_index.VECTOR_CODES_SHORTLIST_FACTOR)
    conn = brain_sql.connect(tmp_path / "brain.db")
    texts = sentences(4000)
    rng = random.Random(1)
    records = [{"_id": str(i), "text": t, "scope": rng.choice(["/a", "/b"])} for i, t in enumerate(texts)]
    for start in range(0, len(records), MAX_REMEMBER_RECORDS):
        brain_sql.remember(conn, records[start : start + MAX_REMEMBER_RECORDS])
    if SCIFACT:
        claims = [json.loads(line)["text"] for line in open(SCIFACT / "queries.jsonl")][:100]
    else:
        claims = [json.loads(line)["title"] for line in open(SAMPLE)]
    queries = [v.tobytes() for v in quantize_int8(embed(claims, MODEL))]
    current = state.current(conn, 256)
    for chosen in (scoped(), scoped("/a")):
        with current.lock:
            visible = current.chunks.visible(chosen)
            coded = [current.chunks.nearest(q, visible, 10) for q in queries]
        exact = [[tuple(row) for row in vector_leg(conn, q, chosen, n=10)] for q in queries]
        assert all(len(e) == 10 for e in exact)
        share = np.mean([len(set(c) & set(e)) / len(e) for c, e in zip(coded, exact)])
        assert share >= 0.99, share
