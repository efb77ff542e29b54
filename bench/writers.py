"""Writers taking turns: concurrent CLI ingests and /-/remember traffic into one brain.

    python3 bench/writers.py [--base 10000] [--records 3000] [--ingests 3] [--compare /work/main]

On a brain of --base records, --ingests `sqlite-utils brain ingest` processes of
--records new records each start at once, while one client POSTs 5 records to
/-/remember every 0.5 s to `datasette serve` of the same file (a plugin config
granting brain-write). Prints each ingest's exit status and records/s (wall time
of the process), remember's count, statuses, p50 and p99, whether every record
is stored and `check` finds nothing, and one ingest of --records alone into the
same base brain. Records are made as bench/ingest.py makes them. With --compare
ROOT the same runs are made with the code at ROOT first (PYTHONPATH=ROOT), and
this checkout's figures are given as ratios of its.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import brain_sql
from brain_sql.consistency import check

sys.path.insert(0, str(Path(__file__).parent))
from harness import percentile, post, serve, stop  # noqa: E402
from ingest import make_records  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SQLITE_UTILS = "sqlite-utils"
WRITER = {"plugins": {"datasette-brain": {"allow_write": True}}}


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return path


def copy(source, target):
    """A whole copy of the brain at `source` (SQLite's backup: the log's pages too)."""
    into = brain_sql.connect(target)
    brain_sql.connect(source).backup(into)
    into.close()
    return target


def ingest(brain, source, env):
    """Start `sqlite-utils brain ingest brain source`: (process, start time, its output files)."""
    out, err = (tempfile.TemporaryFile("w+") for _ in range(2))
    process = subprocess.Popen(
        [SQLITE_UTILS, "brain", "ingest", str(brain), str(source)], env=env, stdout=out, stderr=err, text=True
    )
    return process, time.perf_counter(), (out, err)


def finished(process, started, outputs, records):
    """(exit status, records/s by wall time, seconds the ingest reported, CPU seconds
    it used, last error line)."""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    out, err = outputs
    out.seek(0), err.seek(0)
    reported = re.search(r"([\d.]+)s$", out.read().strip())
    error = "" if process.returncode == 0 else (err.read().strip().splitlines() or ["?"])[-1][:200]
    cpu = usage.ru_utime + usage.ru_stime
    return process.returncode, records / wall, float(reported.group(1)) if reported else float("nan"), cpu, error


def remember_client(url, records, every, enough):
    """POST `records` five at a time every `every` s until `enough` is set: [(status, ms)]."""
    results, n = [], 0
    began = time.perf_counter()
    while not enough.is_set():
        results.append(post(url, records[5 * n : 5 * n + 5]))
        n += 1
        enough.wait(max(0.0, began + n * every - time.perf_counter()))
    return results


def run(code, work, args, base_records, batches, remembered):
    """The figures for the code at `code` (a checkout's root), in folder `work`."""
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(code)}
    base = work / "base.db"
    status, base_rate, _, _, error = finished(*ingest(base, base_records, env), args.base)
    assert status == 0, error
    alone_brain = copy(base, work / "alone.db")
    status, alone_rate, alone_reported, alone_cpu, error = finished(*ingest(alone_brain, batches[0], env), args.records)
    assert status == 0, error

    brain = copy(base, work / "live.db")
    metadata = work / "metadata.json"
    metadata.write_text(json.dumps(WRITER))
    server, url = serve(brain, options=["-m", str(metadata)], env=env)
    url = f"{url}/live/-/remember"
    try:
        post(url, [{"_id": "warm-up", "text": "the server's model is loaded before the clock starts"}])
        enough = threading.Event()
        results = []
        client = threading.Thread(target=lambda: results.extend(remember_client(url, remembered, args.every, enough)))
        client.start()
        time.sleep(1.0)  # remember alone first
        ingests = [ingest(brain, batch, env) for batch in batches]
        done = [finished(*started, args.records) for started in ingests]
        enough.set()
        client.join()
    finally:
        stop(server)
    conn = brain_sql.connect(brain)
    stored = conn.execute("select count(*) from documents").fetchone()[0]
    expected = 1 + args.base + sum(args.records for status, *_ in done if status == 0)
    expected += 5 * sum(1 for status, _ in results if status == 201)
    latencies = [ms for _, ms in results]
    statuses = {}
    for status, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "base_rate": base_rate,
        "alone_rate": alone_rate,
        "alone_reported": args.records / alone_reported,
        "alone_cpu": args.records / alone_cpu,
        "ingests": done,
        "remembers": len(results),
        "statuses": statuses,
        "p50": statistics.median(latencies) / 1000,
        "p99": percentile(latencies, 99) / 1000,
        "max": max(latencies) / 1000,
        "stored": stored,
        "expected": expected,
        "check": check(conn) or "consistent",
    }


def show(name, figures):
    print(f"{name}:")
    print(f"  base brain:  {figures['base_rate']:,.0f} records/s (CLI ingest into an empty file, wall time)")
    print(
        f"  alone:       {figures['alone_rate']:,.0f} records/s wall, {figures['alone_reported']:,.0f} records/s "
        f"as the ingest reports it, {figures['alone_cpu']:,.0f} records per CPU-second of the process"
    )
    for n, (status, rate, _, cpu, error) in enumerate(figures["ingests"]):
        print(
            (
                f"  ingest {n}:    exit {status}, {rate:,.0f} records/s wall, {cpu:.1f} CPU-s"
                f"{'; ' + error if error else ''}"
            )
        )
    statuses = ", ".join(f"{count} x {status}" for status, count in sorted(figures["statuses"].items()))
    print(
        f"  remember:    {figures['remembers']} requests ({statuses}); p50 {figures['p50']:.2f} s, "
        f"p99 {figures['p99']:.2f} s, max {figures['max']:.2f} s"
    )
    print(f"  stored:      {figures['stored']:,} of {figures['expected']:,} documents; check: {figures['check']}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=3_000)
    parser.add_argument("--ingests", type=int, default=3)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--compare", help="another checkout's root, e.g. /work/main, run first")
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/scifact/corpus.jsonl"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="brain-writers-"))
    records = list(make_records(args.corpus, args.base + args.ingests * args.records))
    base = write_jsonl(work / "base.jsonl", records[: args.base])
    batches = [
        write_jsonl(
            work / f"batch{n}.jsonl", records[args.base + n * args.records : args.base + (n + 1) * args.records]
        )
        for n in range(args.ingests)
    ]
    remembered = [{**r, "_id": f"m{i}"} for i, r in enumerate(make_records(args.corpus, 2_000, seed=11))]
    runs = {}
    for name, code in ([("compare", args.compare)] if args.compare else []) + [("this", ROOT)]:
        runs[name] = run(code, work / name, args, base, batches, remembered)
    print(
        f"{args.ingests} ingests of {args.records:,} records into a {args.base:,}-record brain, remember of 5 "
        f"records every {args.every} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; files in {work}"
    )
    for name, figures in runs.items():
        show(f"{args.compare} (compare)" if name == "compare" else f"{ROOT} (this)", figures)
    if args.compare:
        a, b = runs["compare"], runs["this"]
        rates = [statistics.mean(r for _, r, *_ in x["ingests"]) for x in (a, b)]
        print(
            f"ratios this / compare: ingest alone {b['alone_rate'] / a['alone_rate']:.2f}x (wall), "
            f"{b['alone_reported'] / a['alone_reported']:.2f}x (reported), {b['alone_cpu'] / a['alone_cpu']:.2f}x "
            f"(per CPU-second); concurrent ingest mean rate {rates[1] / rates[0]:.2f}x; remember p50 "
            f"{b['p50'] / a['p50']:.2f}x, p99 {b['p99'] / a['p99']:.2f}x; remembers answered "
            f"{b['remembers'] / a['remembers']:.2f}x"
        )


if __name__ == "__main__":
    main()
