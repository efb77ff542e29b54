"""A million memories: issue 19's table in one run, through the public commands only.

    python3 bench/scale.py --records 50000 [--seconds 15] [--clients 4] [--queries 1109]
    python3 bench/scale.py --reuse BRAIN [--no-copy] [--seconds 5]

`--records N` builds a fresh brain from bench/ingest.py's records with `sqlite-utils brain
ingest` (rate = N / the whole run's wall time); `--reuse` serves an existing brain, on a
copy unless `--no-copy` (then served immutable, and the writing phase is skipped). Then
`datasette serve` on loopback: seconds from its start to the first answered recall, one
client's p50 (against a numpy scan of as many float vectors, in this process), `--clients`
quiet clients' throughput, the same clients while a `sqlite-utils brain ingest` of
`--batch` new records starts every second (p99, failures, 503s, records stored), the
server's RSS and peak after the run, and four Datasette pages. Queries are SciFact's claims,
each phase continuing where the last stopped, so none repeats before all were asked.
Every wait is bounded; a server that never answers is reported. Exit 1 if a goal is missed.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from brain_sql.connection import open_connection
from brain_sql.schema import recorded_model_and_dimension

sys.path.insert(0, str(Path(__file__).parent))
from harness import (  # noqa: E402  # noqa: E402
    FAILED,
    clients,
    first_recall,
    get,
    median,
    memory_mb,
    percentile,
    post,
    queries_from,
    start_server,
    stop,
    working_copy,
)
from ingest import ROOT, make_records  # noqa: E402

GOALS = {  # row: (goal at 50,000, goal at 1,000,000, the figure is at least or at most the goal)
    "ingest": (2000, 2000, ">="),  # records/s
    "first_recall": (1, 3, "<="),  # seconds
    "single_p50": (20, 50, "<="),  # ms
    "quiet": (80, 30, ">="),  # recalls/s
    "writing": (500, 1000, "<="),  # p99 ms
    "rss": (600, 3072, "<="),  # MB
    "page": (1, 1, "<="),  # seconds
}
PAGES = {
    "knowledge table": "/{db}/knowledge",
    "a facet": "/{db}/knowledge?_facet=scope",
    "decayed": "/{db}/-/decayed",
    "entities": "/{db}/-/entities",
}
PAGES_SCRIPT = Path(__file__).with_name("pages.py")
INGEST = ["sqlite-utils", "brain", "ingest"]
INGEST_TIMEOUT = 120  # seconds one small ingest may take before it is killed and counted as failed
IN_FLIGHT = 2  # small ingests running at once, at most: each waits for the write lock in turn


def build(args, work):
    """A fresh brain of `--records` records: (its path, the whole `sqlite-utils brain ingest` run's seconds)."""
    records, brain = work / "records.jsonl", work / "brain.db"
    with open(records, "w", encoding="utf-8") as out:
        for record in make_records(args.corpus, args.records):
            out.write(json.dumps(record) + "\n")
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [*INGEST, str(brain), str(records)], capture_output=True, text=True, timeout=300 + args.records / 100
        )
        seconds = time.perf_counter() - started
    except subprocess.TimeoutExpired as ex:
        raise SystemExit(f"the ingest of {args.records:,} records took more than {ex.timeout:.0f} s") from None
    if result.returncode:
        raise SystemExit(f"the ingest of {args.records:,} records failed: {result.stderr.strip()[-500:]}")
    records.unlink()
    return brain, seconds


def writer(brain, work, args, deadline, log):
    """Until `deadline`, start an ingest of `--batch` records no brain holds yet every second,
    at most IN_FLIGHT at once (one CLI run takes seconds to start); `log` gets (status, seconds)."""
    fresh, running, n, due = make_records(args.corpus, 10**9, seed=11), [], 0, 0.0
    while running or time.perf_counter() < deadline:
        now = time.perf_counter()
        for process, began, err in list(running):
            if process.poll() is None and now - began < INGEST_TIMEOUT:
                continue
            if process.poll() is None:
                process.kill()
                process.wait()
                status = f"killed after {INGEST_TIMEOUT} s"
            else:
                status = process.returncode and (err.read_text().strip()[-300:] or f"exit {process.returncode}")
            log.append((status, now - began))
            running.remove((process, began, err))
        if now < deadline and now >= due and len(running) < IN_FLIGHT:
            path, err = work / f"batch{n}.jsonl", work / f"batch{n}.err"
            lines = (json.dumps({**next(fresh), "_id": f"live-{n}-{i}"}) + "\n" for i in range(args.batch))
            path.write_text("".join(lines))
            with open(err, "w") as stderr:
                running.append(
                    (
                        subprocess.Popen([*INGEST, str(brain), str(path)], stdout=subprocess.DEVNULL, stderr=stderr),
                        now,
                        err,
                    )
                )
            n, due = n + 1, now + 1
        time.sleep(0.02)


def pages_by_http(base, db, timeout):
    """{page: seconds} of one GET each against the running server (the first visit after
    recall has run); a page that fails or times out is None."""
    times = {}
    for page, path in PAGES.items():
        status, ms = get(base + path.format(db=db), timeout)
        times[page] = ms / 1000 if status == 200 else None
        if status != 200:
            print(
                f"page {page}: {'no answer' if status == FAILED else status} after {ms / 1000:.1f} s", file=sys.stderr
            )
    return times


def pages_by_script(brain, timeout):
    """{page: seconds} from bench/pages.py's final JSON line; None for each page if it fails."""
    try:
        result = subprocess.run(
            [sys.executable, str(PAGES_SCRIPT), "--brain", str(brain)], capture_output=True, text=True, timeout=timeout
        )
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as ex:
        print(f"bench/pages.py failed: {ex}", file=sys.stderr)
        return dict.fromkeys(PAGES)


def numpy_scan_ms(count, dimension, queries=30):
    """p50 of an exact scan (matmul + top 100) of `count` random unit float32 vectors: the floor."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((count, dimension), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    times = []
    for query in rng.standard_normal((queries + 3, dimension), dtype=np.float32):
        started = time.perf_counter()
        scores = matrix @ (query / np.linalg.norm(query))
        top = np.argpartition(-scores, 100)[:100]
        np.argsort(-scores[top])
        times.append((time.perf_counter() - started) * 1000)
    return median(times[3:])  # after three to warm the BLAS threads


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", type=int, help="build a fresh brain of N records")
    source.add_argument("--reuse", metavar="DB", help="serve an existing brain")
    parser.add_argument(
        "--copy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --reuse, serve a copy (default); --no-copy serves DB immutable, without writes",
    )
    parser.add_argument("--queries", type=int, default=None, help="distinct queries to use (default all)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15, help="seconds per recall phase")
    parser.add_argument("--batch", type=int, default=100, help="records per small ingest")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60, help="seconds any one request or page may take")
    parser.add_argument("--start-timeout", type=float, default=300, help="seconds to wait for the first recall")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (and its brain)")
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/scifact/corpus.jsonl"))
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    queries = queries_from(args.query_file, args.queries)
    work = Path(tempfile.mkdtemp(prefix="brain-scale-"))
    figures = {"records": args.records, "brain": args.reuse, "clients": args.clients, "seconds": args.seconds}
    try:
        return run(args, work, queries, figures, load_before)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(args, work, queries, figures, load_before):
    writable = True
    if args.records:
        brain, seconds = build(args, work)
        figures.update(ingest_s=seconds, ingest_records_per_s=args.records / seconds)
    elif args.copy:
        started = time.perf_counter()
        brain = working_copy(args.reuse, folder=work)[1]
        print(f"copied {args.reuse} to {brain} in {time.perf_counter() - started:.0f} s")
    else:
        brain, writable = Path(args.reuse), False
    conn = open_connection(brain, read_only=True)
    chunks = figures["chunks"] = conn.execute("select count(*) from knowledge").fetchone()[0]
    dimension = recorded_model_and_dimension(conn)[1]
    conn.close()
    column = 1 if chunks >= 500_000 else 0
    db = brain.stem
    url_path = f"/{db}/-/recall"

    cursor = 0

    def phase(until, count):
        """One recall phase from where the last stopped: [(status, ms)], seconds."""
        nonlocal cursor
        began = time.perf_counter()
        results = clients(base + url_path, queries[cursor:] + queries[:cursor], count, until, args.timeout)
        cursor = (cursor + len(results)) % len(queries)
        return results, time.perf_counter() - began

    def ok(results):
        return [ms for status, ms in results if status == 200]

    with open(work / "server.log", "wb") as log:
        started = time.perf_counter()
        server, base = start_server(brain, args.port, immutable=not writable, log=log)
        try:
            figures["first_recall_s"] = first_recall(server, base + url_path, queries[-1], started, args.start_timeout)
            if figures["first_recall_s"] is None:
                print(
                    f"the server answered no recall within {args.start_timeout:.0f} s of its start "
                    f"(exit {server.poll()}); its log ends:\n{(work / 'server.log').read_text()[-1500:]}"
                )
                print(json.dumps(figures))
                return 2
            for q in queries[-1 - 2 * args.clients : -1]:  # every read thread's state, once
                post(base + url_path, {"q": q}, args.timeout)
            deadline = time.perf_counter() + args.seconds
            single, _ = phase(lambda: time.perf_counter() > deadline, 1)
            deadline = time.perf_counter() + args.seconds
            quiet, quiet_s = phase(lambda: time.perf_counter() > deadline, args.clients)
            figures.update(
                single_p50_ms=median(ok(single)),
                single_p95_ms=percentile(ok(single), 95),
                single_n=len(single),
                single_failed=len(single) - len(ok(single)),
                quiet_recalls_per_s=len(quiet) / quiet_s,
                quiet_p50_ms=median(ok(quiet)),
                quiet_p99_ms=percentile(ok(quiet), 99),
                quiet_failed=len(quiet) - len(ok(quiet)),
            )
            if writable:
                ingests, deadline = [], time.perf_counter() + args.seconds
                thread = threading.Thread(target=writer, args=(brain, work, args, deadline, ingests), daemon=True)
                thread.start()
                loaded, loaded_s = phase(lambda: not thread.is_alive(), args.clients)
                figures.update(
                    writing_recalls_per_s=len(loaded) / loaded_s,
                    writing_p50_ms=median(ok(loaded)),
                    writing_p99_ms=percentile(ok(loaded), 99),
                    writing_failed=len(loaded) - len(ok(loaded)),
                    writing_503=sum(status == 503 for status, _ in loaded),
                    ingests=len(ingests),
                    ingest_failures=[status for status, _ in ingests if status],
                    ingest_p50_s=median([s for _, s in ingests]),
                    records_sent=args.batch * len(ingests),
                    commits_per_s=sum(1 for status, _ in ingests if not status) / loaded_s,
                )
            if not PAGES_SCRIPT.exists():
                figures["pages_s"] = pages_by_http(base, db, args.timeout)
            figures["rss_mb"], figures["rss_peak_mb"] = memory_mb(server.pid)
        finally:
            stop(server)
    if PAGES_SCRIPT.exists():
        figures["pages_s"] = pages_by_script(brain, timeout=10 * args.timeout)
    if writable:
        conn = open_connection(brain, read_only=True)
        figures["records_stored"] = conn.execute(
            "select count(distinct external_id) from knowledge where external_id >= 'live-' and external_id < 'live.'"
        ).fetchone()[0]
        conn.close()
    figures["numpy_scan_p50_ms"] = numpy_scan_ms(chunks, dimension)
    figures["load_before"], figures["load_after"] = load_before, os.getloadavg()
    return report(figures, column, dimension)


def report(f, column, dimension):
    """Print each figure beside its goal, the load average and a final JSON line; 0 if every goal is met."""
    passed, rows = {}, []

    def row(name, label, figure, text, also=True, goal_row=None):
        goal, how = GOALS[goal_row or name][column], GOALS[goal_row or name][2]
        met = figure is not None and (figure >= goal if how == ">=" else figure <= goal)  # NaN meets nothing
        passed[name] = None if figure is None and text.startswith("not measured") else met and also
        rows.append((label, {None: "n/a", True: "pass", False: "FAIL"}[passed[name]], f"{how} {goal:,}", text))

    print(
        f"brain: {f['chunks']:,} chunks ({f['brain'] or format(f['records'], ',') + ' records built'}); "
        f"{f['clients']} clients, {f['seconds']:g} s a phase; goals at {('50,000', '1,000,000')[column]}; "
        f"{os.cpu_count()} cores"
    )
    rate = f.get("ingest_records_per_s")
    row(
        "ingest",
        "ingest, whole run (records/s)",
        rate,
        f"{rate:,.0f} ({f['records']:,} in {f['ingest_s']:.1f} s)" if rate else "not measured (--reuse)",
    )
    row("first_recall", "first recall from start (s)", f["first_recall_s"], f"{f['first_recall_s']:.2f}")
    scan = f["numpy_scan_p50_ms"]
    row(
        "single_p50",
        "1 client HTTP recall p50 (ms)",
        f["single_p50_ms"],
        f"{f['single_p50_ms']:.1f} (p95 {f['single_p95_ms']:.1f}, {f['single_n']} recalls, "
        f"{f['single_failed']} failed; "
        f"{f['single_p50_ms'] / scan:.1f}x a numpy scan of {f['chunks']:,} {dimension}-d floats, {scan:.2f} ms)",
        f["single_failed"] == 0,
    )
    row(
        "quiet",
        f"{f['clients']} clients quiet (recalls/s)",
        f["quiet_recalls_per_s"],
        f"{f['quiet_recalls_per_s']:.1f} (p50 {f['quiet_p50_ms']:.0f} ms, p99 {f['quiet_p99_ms']:.0f} ms, "
        f"{f['quiet_failed']} failed)",
        f["quiet_failed"] == 0,
    )
    label = f"{f['clients']} clients, ingests (p99 ms)"
    if "writing_p99_ms" in f:
        failures = f["ingest_failures"]
        for failure in failures[:3]:
            print(f"an ingest failed: {failure}", file=sys.stderr)
        row(
            "writing",
            label,
            f["writing_p99_ms"],
            f"{f['writing_p99_ms']:.0f} (p50 {f['writing_p50_ms']:.0f} ms, {f['writing_recalls_per_s']:.1f} recalls/s, "
            f"{f['writing_failed']} failed, {f['writing_503']} 503; {f['ingests']} ingests, "
            f"{f['commits_per_s']:.2f}/s, ~{f['ingest_p50_s']:.1f} s each, {len(failures)} failed; "
            f"{f['records_stored']:,} of {f['records_sent']:,} records stored)",
            f["writing_failed"] == 0 and not failures and f["records_stored"] == f["records_sent"],
        )
    else:
        row("writing", label, None, "not measured (--no-copy)")
    row("rss", "server RSS after the run (MB)", f["rss_mb"], f"{f['rss_mb']:,.0f} (peak {f['rss_peak_mb']:,.0f})")
    for page, seconds in f["pages_s"].items():
        row(
            f"page {page}",
            f"page: {page} (s)",
            float("nan") if seconds is None else seconds,
            "failed" if seconds is None else f"{seconds:.2f}",
            goal_row="page",
        )
    width = max(len(label) for label, *_ in rows)
    for label, verdict, goal, text in rows:
        print(f"{label:<{width}}  {verdict:<4}  {goal:>9}  {text}")
    before, after = (" ".join(f"{x:.2f}" for x in f[k]) for k in ("load_before", "load_after"))
    print(f"load average (1, 5, 15 min): before {before}, after {after}")
    f["passed"] = passed
    print(json.dumps({k: None if isinstance(v, float) and math.isnan(v) else v for k, v in f.items()}))
    return 0 if all(v is not False for v in passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
