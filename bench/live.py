"""A live brain: recall served by Datasette while agents write, on a copy of a brain.

    python3 bench/live.py [--brain /tmp/brain-50k.db] [--clients 4] [--ingests 20]

Measures, in one run:
- the first recall after `datasette serve` starts (from the process's start to the
  first answered recall), and the server's RSS once warm;
- quiet recall: one client's p50 / p95, then `--clients` concurrent clients'
  throughput, p50 and p99;
- the same clients while `sqlite-utils brain ingest` commits `--batch` new records
  about once a second, `--ingests` times: p50 and p99 as ratios of the quiet p50,
  failed requests, and whether every record is in the brain afterwards.

Build the brain first with bench/recall.py. Datasette serves on loopback only.
"""

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import brain_sql
from brain_sql.consistency import check

sys.path.insert(0, str(Path(__file__).parent))
from harness import (  # noqa: E402
    clients,
    first_recall,
    memory_mb,
    percentile,
    post,
    queries_from,
    serve,
    stop,
    summary,
    working_copy,  # noqa: E402
)

ROOT = Path(__file__).resolve().parent.parent
SQLITE_UTILS = "sqlite-utils"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brain", default="/tmp/brain-50k.db")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--ingests", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    work, brain, source = working_copy(args.brain, "brain-live-")
    chunks = source.execute("select count(*) from knowledge").fetchone()[0]
    queries = queries_from(args.query_file, args.queries)

    started = time.perf_counter()
    server, base = serve(brain)
    up = time.perf_counter() - started
    url = f"{base}/brain/-/recall"
    try:
        first = first_recall(server, url, queries[0], started, timeout=120)
        if first is None:
            raise SystemExit("the server answered no recall within 120 s of its start")
        for q in queries[:20]:
            post(url, {"q": q})
        rss = memory_mb(server.pid)[0]
        single = [post(url, {"q": q, "k": 10})[1] for q in queries]
        deadline = time.perf_counter() + 15
        began = time.perf_counter()
        quiet = clients(url, queries, args.clients, lambda: time.perf_counter() > deadline)
        quiet_line, quiet_p50, _ = summary(quiet, time.perf_counter() - began)

        done = threading.Event()
        ingest_errors = []

        def writer():
            for n in range(args.ingests):
                path = work / f"batch{n}.jsonl"
                path.write_text(
                    "\n".join(
                        json.dumps(
                            {
                                "_id": f"live-{n}-{i}",
                                "title": f"Live note {n}.{i}",
                                "text": f"Agent turn {n}.{i}: the deploy window moved to Thursday {i} for team {n}.",
                            }
                        )
                        for i in range(args.batch)
                    )
                )
                tick = time.perf_counter()
                result = subprocess.run(
                    [SQLITE_UTILS, "brain", "ingest", str(brain), str(path)], capture_output=True, text=True
                )
                if result.returncode:
                    ingest_errors.append(result.stderr[-500:])
                time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
            done.set()

        thread = threading.Thread(target=writer)
        began = time.perf_counter()
        thread.start()
        loaded = clients(url, queries, args.clients, done.is_set)
        thread.join()
        loaded_line, loaded_p50, loaded_p99 = summary(loaded, time.perf_counter() - began)
        served_rss = memory_mb(server.pid)[0]
    finally:
        stop(server)
    conn = brain_sql.connect(brain)
    stored = conn.execute("select count(*) from knowledge where external_id like 'live-%'").fetchone()[0]
    problems = check(conn)
    print(f"brain: {chunks:,} chunks ({args.brain}); {len(queries)} queries")
    print(
        f"start: server up in {up:.2f} s, first recall answered {first:.2f} s after start; RSS {rss:.0f} MB warm, "
        f"{served_rss:.0f} MB after the writes"
    )
    print(f"quiet, 1 client:     p50 {statistics.median(single):.1f} ms, p95 {percentile(single, 95):.1f} ms")
    print(f"quiet, {args.clients} clients:    {quiet_line}")
    print(
        f"writing, {args.clients} clients:  {loaded_line} "
        f"(p50 {loaded_p50 / quiet_p50:.2f}x quiet; {args.ingests} ingests of {args.batch} records)"
    )
    print(
        f"records: {stored} of {args.ingests * args.batch} stored; ingest failures {len(ingest_errors)}; "
        f"check: {problems or 'consistent'}"
    )


if __name__ == "__main__":
    main()
