"""Recall speed on a 50,000-chunk brain: full pipeline p50/p95 in-process, against
an exact numpy scan of the same vectors (the floor) in the same run.

    python3 bench/recall.py [--records 50000] [--brain /tmp/brain-50k.db] [--queries 200]

The brain is built once from the ingest benchmark's records and reused; queries
are SciFact claims. Reports each leg's median too.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql.embed import embed
from brain_sql.hybrid import recall
from brain_sql.schema import recorded_model
from brain_sql.vectors import quantize_int8

sys.path.insert(0, str(Path(__file__).parent))
from ingest import ROOT, make_records  # noqa: E402


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--brain", default="/tmp/brain-50k.db")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/scifact/corpus.jsonl"))
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    path = Path(args.brain)
    if not path.exists():
        records = path.with_suffix(".jsonl")
        with open(records, "w") as out:
            for record in make_records(args.corpus, args.records):
                out.write(json.dumps(record) + "\n")
        print(brain_sql.ingest(brain_sql.connect(path), [records]).summary())
    conn = brain_sql.connect(path)
    chunks = conn.execute("select count(*) from knowledge").fetchone()[0]
    queries = [json.loads(line)["text"] for line in open(args.query_file)][: args.queries]
    model = recorded_model(conn)
    recall(conn, {"q": queries[0]})  # warm: the model and the read state, loaded once
    warm_rss = next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("VmRSS:"))

    timings, legs = [], {}
    for q in queries:
        started = time.perf_counter()
        result = recall(conn, {"q": q, "k": 10})
        timings.append((time.perf_counter() - started) * 1000)
        for name, value in result["telemetry"].items():
            if name.endswith("_ms") and name != "total_ms":
                legs.setdefault(name, []).append(value)

    ids, vectors = [], []
    for knowledge_id, blob in conn.execute("select knowledge_id, embedding_int8 from vec_knowledge"):
        ids.append(knowledge_id)
        vectors.append(np.frombuffer(blob, dtype=np.int8))
    matrix = np.vstack(vectors).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    floor, scan = [], []
    for q in queries:
        started = time.perf_counter()
        query = quantize_int8(embed([q], model))[0].astype(np.float32)
        begun = time.perf_counter()
        scores = matrix @ (query / np.linalg.norm(query))
        np.argsort(-scores[np.argpartition(-scores, 100)[:100]])
        done = time.perf_counter()
        floor.append((done - started) * 1000)
        scan.append((done - begun) * 1000)

    p50, p95 = statistics.median(timings), percentile(timings, 95)
    print(f"brain: {chunks:,} chunks; {len(queries)} queries")
    print(f"full recall:       p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print("legs (median ms):  " + ", ".join(f"{k[:-3]} {statistics.median(v):.1f}" for k, v in legs.items()))
    print(f"numpy exact scan:  p50 {statistics.median(floor):.1f} ms (embed + matmul + top 100)")
    print(f"ratio:             full recall p50 = {p50 / statistics.median(floor):.1f}x the exact-scan floor")
    vector = statistics.median(legs["vector_ms"])
    print(
        f"vector leg:        p50 {vector:.1f} ms = {vector / statistics.median(scan):.2f}x a numpy scan of the same "
        f"vectors (matmul + top 100, p50 {statistics.median(scan):.1f} ms)"
    )
    print(f"memory:            RSS {warm_rss:.0f} MB once warm (Python, the model, the read state)")


if __name__ == "__main__":
    main()
