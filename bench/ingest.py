"""Ingest benchmark: records/s and peak memory for N records, end to end.

    python3 bench/ingest.py [--records 50000] [--corpus ../shared/data/scifact/corpus.jsonl]

Records are made deterministically from the sentences of a BEIR corpus, so every
record is unique text of realistic length (no dedup shortcuts). The baseline, run
in the same process afterwards, is the floor any embedding ingest pays: parse the
JSONL, embed every text with the same model, and insert the rows with sqlite-utils.
"""

import argparse
import json
import random
import resource
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np
import sqlite_utils

import brain_sql
from brain_sql.config import DEFAULT_MODEL
from brain_sql.embed import embed

ROOT = Path(__file__).resolve().parent.parent


def make_records(corpus, count, seed=7):
    sentences = [
        s.strip() + "."
        for line in open(corpus, encoding="utf-8")
        for s in json.loads(line)["text"].split(". ")
        if len(s.split()) > 4
    ]
    rng = random.Random(seed)
    for i in range(count):
        body = " ".join(rng.choice(sentences) for _ in range(rng.randint(5, 10)))
        # a title summarises its own record, as real titles do (and so is rarely
        # found verbatim in other records)
        title = f"{' '.join(body.split()[:6])} #{i}"
        # a title names an entity, which may hold no invisible character (a few SciFact
        # sentences open with a left-to-right mark): one refused would fail the run
        title = "".join(c for c in title if unicodedata.category(c) != "Cf")
        yield {"_id": f"r{i}", "title": title, "text": body}


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/scifact/corpus.jsonl"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="brain-bench-"))
    path = work / "records.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for record in make_records(args.corpus, args.records):
            out.write(json.dumps(record) + "\n")
    embed(["warm up"], DEFAULT_MODEL)  # model load is not ingest work
    before = peak_mb()

    conn = brain_sql.connect(work / "brain.db")
    brain_sql.migrate(conn)
    started = time.perf_counter()
    report = brain_sql.ingest(conn, [path])
    full = time.perf_counter() - started
    full_peak = peak_mb()
    assert not report.errors, report.errors[:3]

    started = time.perf_counter()
    records = [json.loads(line) for line in open(path, encoding="utf-8")]
    db = sqlite_utils.Database(work / "baseline.db")
    for start in range(0, len(records), 1000):
        batch = records[start : start + 1000]
        vectors = embed([f"{r['title']}\n{r['text']}" for r in batch], DEFAULT_MODEL)
        db["records"].insert_all(
            ({**r, "vector": v.astype(np.float32).tobytes()} for r, v in zip(batch, vectors)),
            pk="_id",
        )
    baseline = time.perf_counter() - started

    print(report.summary())
    print(f"records:            {args.records:,}")
    print(f"brain ingest:       {full:.1f} s = {args.records / full:,.0f} records/s")
    print(
        f"baseline (parse + embed + sqlite-utils insert): {baseline:.1f} s = {args.records / baseline:,.0f} records/s"
    )
    print(f"ratio:              {full / baseline:.2f}x the baseline's time")
    print(f"peak memory:        {full_peak:,.0f} MB during ingest ({before:,.0f} MB with the model loaded)")
    print(f"brain file:         {(work / 'brain.db').stat().st_size / 1e6:,.0f} MB in {work}")


if __name__ == "__main__":
    main()
