"""Warm HTTP recall on a large brain: p50 / p95 for one client, then throughput
and p95 with 8 concurrent clients, against in-process recall in this process.

    python3 bench/serve.py [--brain /tmp/brain-50k.db] [--queries 100]

Build the brain first with bench/recall.py (it reuses the same path). Datasette
serves it on loopback in a child process; clients use urllib in threads.
"""

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import brain_sql

sys.path.insert(0, str(Path(__file__).parent))
from harness import percentile, post, queries_from, serve, stop  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brain", default="/tmp/brain-50k.db")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    queries = queries_from(args.query_file, args.queries)
    name = Path(args.brain).stem

    conn = brain_sql.connect(args.brain)
    brain_sql.recall(conn, {"q": queries[0]})
    in_process = []
    for q in queries:
        started = time.perf_counter()
        brain_sql.recall(conn, {"q": q, "k": 10})
        in_process.append((time.perf_counter() - started) * 1000)

    server, base = serve(args.brain)
    url = f"{base}/{name}/-/recall"
    try:
        for q in queries[:10]:  # warm every read connection's graph and the model
            post(url, {"q": q})
        single = [post(url, {"q": q, "k": 10})[1] for q in queries]
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            results = list(pool.map(lambda q: post(url, {"q": q, "k": 10}), queries * 2))
        elapsed = time.perf_counter() - started
    finally:
        stop(server)
    failed = sum(1 for status, _ in results if status != 200)
    concurrent = [ms for _, ms in results]
    print(f"brain: {args.brain}; {len(queries)} queries")
    print(f"in-process recall:  p50 {statistics.median(in_process):.1f} ms, p95 {percentile(in_process, 95):.1f} ms")
    print(
        f"HTTP, one client:   p50 {statistics.median(single):.1f} ms, p95 {percentile(single, 95):.1f} ms "
        f"({statistics.median(single) / statistics.median(in_process):.2f}x in-process p50)"
    )
    print(
        f"HTTP, {args.clients} clients:    {len(results) / elapsed:.1f} requests/s, p50 "
        f"{statistics.median(concurrent):.1f} ms, "
        f"p95 {percentile(concurrent, 95):.1f} ms, {failed} failed"
    )


if __name__ == "__main__":
    main()
