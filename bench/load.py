"""Load: 8 concurrent recall clients against a served brain while the CLI ingests
2,000 more records into the same file. Counts failed requests and lost records.

    python3 bench/load.py [--brain /tmp/brain-50k.db] [--records 2000] [--clients 8]

Works on a copy of the brain (built by bench/recall.py). Datasette serves it on
loopback in a child process; the ingest is `sqlite-utils brain ingest` in
another. A record is lost if it is not in the brain, with its vectors and
full-text rows, once the ingest has exited.
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
from harness import percentile, post, queries_from, serve, stop, working_copy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brain", default="/tmp/brain-50k.db")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    work, brain, source = working_copy(args.brain, "brain-load-")
    before = brain_sql.connect(brain).execute("select count(*) from documents").fetchone()[0]
    records = work / "more.jsonl"
    with open(records, "w") as out:
        for i in range(args.records):
            out.write(
                json.dumps(
                    {
                        "_id": f"load-{i}",
                        "title": f"Load test note {i}",
                        "text": f"Load test memory {i}: the pager rota changes on Mondays.",
                    }
                )
                + "\n"
            )
    queries = queries_from(args.query_file, 200)
    server, base = serve(brain)
    url = f"{base}/brain/-/recall"
    results, done = [], threading.Event()

    def client(offset):
        i = offset
        while not done.is_set():
            results.append(post(url, {"q": queries[i % len(queries)], "k": 10}))
            i += args.clients

    try:
        post(url, {"q": queries[0]})
        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        ingest = subprocess.run(
            [sys.executable, "-m", "sqlite_utils", "brain", "ingest", str(brain), str(records)],
            capture_output=True,
            text=True,
        )
        ingest_seconds = time.perf_counter() - started
        done.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        stop(server)
    conn = brain_sql.connect(brain)
    stored = conn.execute("select count(*) from knowledge where external_id like 'load-%'").fetchone()[0]
    after = conn.execute("select count(*) from documents").fetchone()[0]
    problems = check(conn)
    failed = sum(1 for status, _ in results if status != 200)
    times = [ms for status, ms in results if status == 200]
    print(
        (
            f"ingest of {args.records} records: exit {ingest.returncode}, {ingest_seconds:.1f}s while serving; "
            f"{ingest.stdout.strip()}"
        )
    )
    print(
        f"recall under load: {len(results)} requests in {elapsed:.1f}s = {len(results) / elapsed:.1f}/s, "
        f"p50 {statistics.median(times):.0f} ms, p95 {percentile(times, 95):.0f} ms, {failed} failed"
    )
    print(
        f"records: {stored} of {args.records} stored, {args.records - stored} lost; documents {before} -> {after}; "
        f"consistent {not problems}"
    )
    sys.exit(0 if not failed and stored == args.records and not problems and ingest.returncode == 0 else 1)


if __name__ == "__main__":
    main()
