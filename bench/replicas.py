"""Read replicas on Litestream: how far behind the primary they are, and how fast
they recall, while the primary takes writes.

    python3 bench/replicas.py [--brain /tmp/brain-50k.db] [--writes 40] [--replicas 2] [--clients 2]

On a copy of the brain, each part its own process on loopback: the primary's
Datasette, `sqlite-utils brain replicate` to a file:// replica, and `--replicas`
copies kept by `sqlite-utils brain follow`, each served by Datasette. `--clients`
recall clients per replica recall SciFact claims all the time, while the primary
takes `--writes` remembers about once a second through its JSON API. Reports:

- lag: from the primary's acknowledgement of a memory to the first recall on each
  replica that finds it: p50, p99, max (goals: p50 under 2 s, p99 under 5 s);
- recall on the replicas meanwhile: requests, p50, p99 (goal: under 1 s), failures;
- the same clients' recall before any write (quiet), for comparison.

Build the brain first with bench/recall.py (its default path is this one's).
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from serve import percentile, queries_from

import brain_sql

ROOT = Path(__file__).resolve().parent.parent


def start(args, log, **kwargs):
    return subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, **kwargs)


def request(url, body=None, timeout=60):
    """(status, ms, JSON body) of a GET (or a JSON POST with `body`)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as ex:
        status, payload = ex.code, ex.read()
    except OSError:
        return 599, (time.perf_counter() - started) * 1000, None
    return status, (time.perf_counter() - started) * 1000, json.loads(payload or b"null")


def serve(path, metadata, log):
    """Datasette serving `path` with `metadata` on a free loopback port, once it answers."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    meta = Path(log).with_suffix(".json")
    meta.write_text(json.dumps(metadata))
    process = start(
        [sys.executable, "-m", "datasette", "serve", str(path), "-m", str(meta), "-h", "127.0.0.1", "-p", str(port)],
        log,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while request(f"{url}/-/versions.json", timeout=2)[0] != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"datasette did not start: {Path(log).read_text()[-2000:]}")
        time.sleep(0.2)
    return process, url


def wait_until(check, seconds, what):
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {seconds} s")
        time.sleep(0.2)


def recall_load(urls, queries, clients, stop):
    """Recall from `clients` threads per replica until `stop`: [(status, ms)]."""
    results = []

    def client(url, offset):
        i = offset
        while not stop.is_set():
            status, ms, _ = request(f"{url}/brain/-/recall", {"q": queries[i % len(queries)], "k": 10})
            results.append((status, ms))
            i += clients

    threads = [threading.Thread(target=client, args=(url, n)) for url in urls for n in range(clients)]
    for thread in threads:
        thread.start()
    return results, threads


def summary(results):
    ok = [ms for status, ms in results if status == 200]
    failed = len(results) - len(ok)
    if not ok:
        return f"{len(results)} requests, all failed"
    return (
        f"{len(results)} requests, p50 {statistics.median(ok):.0f} ms, p99 {percentile(ok, 99):.0f} ms, {failed} failed"
    )


def seen_on(urls, word, memory_id, acknowledged):
    """Seconds from `acknowledged` until each replica's recall of `word` finds `memory_id`
    (watched at once, one thread a replica); a replica that takes over 60 s is left out."""
    found = []

    def first_seen(url):
        while time.monotonic() - acknowledged < 60:
            status, _, result = request(f"{url}/brain/-/recall?q={word}&k=3")
            if status == 200 and memory_id in [hit["id"] for hit in result["hits"]]:
                found.append(time.monotonic() - acknowledged)
                return
            time.sleep(0.05)

    watchers = [threading.Thread(target=first_seen, args=(url,)) for url in urls]
    for watcher in watchers:
        watcher.start()
    for watcher in watchers:
        watcher.join()
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brain", default="/tmp/brain-50k.db")
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--clients", type=int, default=2, help="recall clients per replica")
    parser.add_argument("--quiet-seconds", type=float, default=10)
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    args = parser.parse_args()
    queries = queries_from(args.query_file, 200)
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    processes = []
    try:
        primary = work / "primary" / "brain.db"
        primary.parent.mkdir()
        source = brain_sql.connect(args.brain)  # checkpointed into one file, then copied
        source.execute("pragma wal_checkpoint(truncate)")
        chunks = source.execute("select count(*) from knowledge").fetchone()[0]
        source.close()
        shutil.copy(args.brain, primary)
        store = (work / "store").as_uri()
        brain = [sys.executable, "-m", "sqlite_utils", "brain"]
        processes.append(start([*brain, "replicate", str(primary), store], work / "replicate.log"))
        wait_until(lambda: list((work / "store").glob("ltx/9/*.ltx")), 600, "the first snapshot")
        copies = [work / f"replica{n}" / "brain.db" for n in range(args.replicas)]
        for n, copy in enumerate(copies):
            processes.append(start([*brain, "follow", store, str(copy), "--interval", "0.5"], work / f"follow{n}.log"))
        for copy in copies:
            wait_until(
                lambda copy=copy: (s := brain_sql.replica_status(copy)) and s["state"] == "following", 600, "a copy"
            )
        plugin = {"allow_write": True}
        process, primary_url = serve(primary, {"plugins": {"datasette-brain": plugin}}, work / "primary.log")
        processes.append(process)
        urls = []
        for n, copy in enumerate(copies):
            metadata = {"plugins": {"datasette-brain": {**plugin, "primary": primary_url}}}
            process, url = serve(copy, metadata, work / f"replica{n}.log")
            processes.append(process)
            urls.append(url)
        for url in urls:  # warm: the model and the read state
            request(f"{url}/brain/-/recall", {"q": queries[0]})
        print(f"{chunks:,} chunks; {args.replicas} replicas, {args.clients} recall clients each; {work}")

        stop = threading.Event()
        quiet, threads = recall_load(urls, queries, args.clients, stop)
        time.sleep(args.quiet_seconds)
        stop.set()
        for thread in threads:
            thread.join()
        print(f"quiet recall on the replicas: {summary(quiet)}")

        stop = threading.Event()
        busy, threads = recall_load(urls, queries, args.clients, stop)
        lags, missing = [], 0
        for i in range(args.writes):
            started = time.monotonic()
            word = f"zq{i}replicamarker"
            record = {"_id": f"bench-{i}", "title": f"Marker {i}", "text": f"The {word} is here."}
            status, _, body = request(f"{primary_url}/brain/-/remember", record)
            if status != 201:
                raise SystemExit(f"the primary refused a write: {status} {body}")
            found = seen_on(urls, word, body["ids"][0][0], time.monotonic())
            lags.extend(found)
            missing += len(urls) - len(found)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        stop.set()
        for thread in threads:
            thread.join()
        lags.sort()
        print(
            f"lag, acknowledged on the primary to recalled on a replica, over {len(lags)} (write, replica) pairs: "
            f"p50 {statistics.median(lags):.2f} s, p99 {percentile(lags, 99):.2f} s, max {lags[-1]:.2f} s; "
            f"{missing} never seen within 60 s"
        )
        print(f"recall on the replicas while the primary wrote: {summary(busy)}")
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
