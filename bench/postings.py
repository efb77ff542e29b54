"""The lexical leg's postings against FTS5, on a brain's rows: build time and
memory, and search latency beside FTS5's bm25() and bm25.search.

    python3 bench/postings.py [--brain /work/scale/brain-1m.db] [--sizes 50000,200000] [--queries 300]

The brain is opened read-only. For each size N, its first N chunks are indexed
into Postings (build seconds, bytes per posting, the term dictionary's size, the
process's RSS), then each SciFact query text is searched for, top 100:
- nothing hidden: FTS5's bm25() (on an in-memory knowledge_fts of the N rows, or
  the brain's own when N is every row) against Postings.search;
- 1% of the rows hidden: bm25.search over the reach (the index's postings read
  through fts5vocab) against Postings.search with the visible mask;
p50 / p95 of each in CPU time (the machine may be shared; the wall-clock median
beside it), and every answer checked equal to the other's (ids, scores). First,
the tokenizer alone on the first --tokenize rows: lexical.index_terms against an
in-memory FTS5 table and its instance vocabulary.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from brain_sql import bm25, lexical
from brain_sql.config import FTS_COLUMN_WEIGHTS
from brain_sql.connection import sqlite3
from brain_sql.postings import Postings
from brain_sql.reach import Reach
from brain_sql.schema import fts_length

ROOT = Path(__file__).resolve().parent.parent
QUERIES = next(
    (p / "shared/data/scifact/queries.jsonl" for p in ROOT.parents if (p / "shared/data/scifact").exists()), None
)
COLUMNS = "title, content, context"
TOP = 100


def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def timed(function, items):
    """([result], [CPU ms]) of function(item) for each item: CPU time, as the machine
    may be shared (the wall-clock median is printed beside it)."""
    results, times, walls = [], [], []
    for item in items:
        start, wall = time.process_time(), time.perf_counter()
        results.append(function(item))
        times.append((time.process_time() - start) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return results, Times(times, walls)


class Times(list):
    def __init__(self, times, walls):
        super().__init__(times)
        self.walls = walls

    def __str__(self):
        return (
            f"p50 {statistics.median(self):.1f} ms p95 {percentile(self, 0.95):.1f} ms "
            f"(wall p50 {statistics.median(self.walls):.1f})"
        )


def fts_memory(rows, vocabulary=True):
    """An in-memory contentless knowledge_fts of `rows` (rowid, title, content, context)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"create virtual table knowledge_fts using fts5({COLUMNS}, content='', tokenize='porter unicode61')")
    if vocabulary:
        conn.execute("create virtual table knowledge_fts_vocab using fts5vocab(knowledge_fts, 'instance')")
        conn.execute("create virtual table knowledge_fts_terms using fts5vocab(knowledge_fts, 'row')")
    conn.executemany(f"insert into knowledge_fts (rowid, {COLUMNS}) values (?, ?, ?, ?)", rows)
    return conn


def tokenizer(brain, count):
    rows = brain.execute(f"select id, {COLUMNS} from knowledge order by id limit ?", [count]).fetchall()
    weights = dict(zip(("title", "content", "context"), FTS_COLUMN_WEIGHTS))
    start = time.process_time()
    conn = fts_memory(rows)
    held = {}
    for term, doc, col in conn.execute("select term, doc, col from knowledge_fts_vocab"):
        held[doc, term] = held.get((doc, term), 0) + weights[col]
    fts = time.process_time() - start
    rates = []
    for _ in range(2):  # first with nothing remembered, then as when the brain's words are known
        start = time.process_time()
        found = [
            lexical.index_terms([r[1:] for r in rows[at : at + 2048]], FTS_COLUMN_WEIGHTS)
            for at in range(0, len(rows), 2048)
        ]
        rates.append(len(rows) / (time.process_time() - start))
    mine = {}
    for at, batch in zip(range(0, len(rows), 2048), found):
        for i, terms in enumerate(batch.by_row()):
            mine.update({(rows[at + i][0], term): weight for term, weight in terms.items()})
    print(
        f"tokenizer, {len(rows):,} rows: in-memory FTS5 + instance vocabulary {len(rows) / fts:,.0f} rows/s; "
        f"lexical.index_terms {rates[0]:,.0f} rows/s at first ({rates[0] * fts / len(rows):.1f}x), "
        f"{rates[1]:,.0f} rows/s with its words known ({rates[1] * fts / len(rows):.1f}x); same terms: {held == mine}"
    )


def scale(brain, size, total, texts, seed=0):
    every = size >= total
    read = f"select id, {COLUMNS} from knowledge order by id limit ?"
    rss = rss_mb()
    start, wall = time.process_time(), time.perf_counter()
    postings, ids, lengths = Postings(), [], []
    cursor = brain.execute(read, [size])
    while rows := cursor.fetchmany(50_000):  # as the read state would: its rows in batches
        ids += [row[0] for row in rows]
        lengths.append(postings.add(np.arange(len(ids) - len(rows), len(ids)), [row[1:] for row in rows]))
    built, wall = time.process_time() - start, time.perf_counter() - wall
    ids, lengths = np.array(ids, dtype=np.int64), np.concatenate(lengths)
    count, nbytes = postings.postings_count(), postings.nbytes()
    terms = sys.getsizeof(postings.vocabulary) + sum(sys.getsizeof(t) + 28 for t in postings.vocabulary)
    print(
        f"\n{len(ids):,} rows: built in {built:.1f}s CPU ({len(ids) / built:,.0f} rows/s; {wall:.1f}s wall); "
        f"{count:,} postings, "
        f"{nbytes / 2**20:.0f} MB ({nbytes / count:.2f} bytes each) + term dictionary ~{terms / 2**20:.0f} MB "
        f"({len(postings.vocabulary):,} terms); RSS {rss:.0f} -> {rss_mb():.0f} MB"
    )
    conn = brain if every else fts_memory(brain.execute(read, [size]))
    sizes = [
        fts_length(size) for (size,) in conn.execute("select sz from knowledge_fts_docsize order by id limit ?", [size])
    ]
    assert sizes == lengths.tolist(), "lengths are FTS5's docsizes"
    matches = [lexical.plan(text) for text in texts]

    def phrase_postings(words):
        found = bm25.phrase_occurrences(conn, words)
        return np.searchsorted(ids, list(found)), list(found.values())

    def ours(visible):
        return lambda match: [
            (int(ids[s]), score)
            for s, score in postings.search(match, visible, lengths, TOP, order=ids, phrase_postings=phrase_postings)
        ]

    weights = ", ".join(map(str, FTS_COLUMN_WEIGHTS))
    sql = (
        f"select rowid, bm25(knowledge_fts, {weights}) s from knowledge_fts where knowledge_fts match ? order by s, "
        "rowid limit ?"
    )
    everything = np.ones(len(ids), dtype=bool)
    theirs, fts_ms = timed(lambda m: [tuple(r) for r in conn.execute(sql, [m.expression(), TOP])], matches)
    mine, our_ms = timed(ours(everything), matches)
    same = sum(a == b for a, b in zip(theirs, mine))
    print(f"  nothing hidden: FTS5 bm25() {fts_ms}; postings {our_ms}; equal {same}/{len(matches)}")
    visible = np.random.default_rng(seed).random(len(ids)) >= 0.01
    reach = Reach(ids[visible], lengths[visible], total=len(ids))
    theirs, reach_ms = timed(lambda m: bm25.search(bm25.TermStats(conn, reach), m, TOP), matches)
    mine, our_ms = timed(ours(visible), matches)
    same = sum(a == b for a, b in zip(theirs, mine))
    print(f"  1% hidden: bm25.search {reach_ms}; postings {our_ms}; equal {same}/{len(matches)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brain", default="/work/scale/brain-1m.db")
    parser.add_argument("--sizes", default="50000,200000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--tokenize", type=int, default=10_000)
    parser.add_argument("--query-file", default=str(QUERIES))
    args = parser.parse_args()
    brain = sqlite3.connect(f"file:{args.brain}?immutable=1", uri=True)
    total = brain.execute("select count(*) from knowledge").fetchone()[0]
    texts = [json.loads(line)["text"] for line in open(args.query_file)][: args.queries]
    tokenizer(brain, args.tokenize)
    for size in map(int, args.sizes.split(",")):
        scale(brain, min(size, total), total, texts)


if __name__ == "__main__":
    main()
