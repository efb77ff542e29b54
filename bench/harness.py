"""What the serving benchmarks share: a Datasette server on loopback, recall over HTTP
with a timeout on every request, concurrent clients, percentiles, the server's memory.

Every wait here is bounded: a server that never answers is reported, not waited on.
"""

import http.client
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

FAILED = 599  # the status counted for a request that got no HTTP answer (refused, reset, timed out)


def in_tree(tree, code, args, cwd=None):
    """The JSON object the last line of `code` (a Python program run with `args` by a
    fresh interpreter, `tree` first on its path) prints; it must say, as "code", that
    it ran brain_sql from `tree` (run from a temporary folder by default: `-c` puts
    the working folder first on the path, and a checkout there would be imported)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    result = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd or tempfile.gettempdir(),
    )
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["code"].startswith(str(tree)), (figures["code"], tree)
    return figures


def post(url, body, timeout=60):
    """(status, ms) of one JSON POST; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return _timed(request, timeout)


def get(url, timeout=60):
    return _timed(urllib.request.Request(url), timeout)


def _timed(request, timeout):
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = response.status
            response.read()
    except urllib.error.HTTPError as ex:
        status = ex.code
    except (OSError, http.client.HTTPException):
        status = FAILED
    return status, (time.perf_counter() - started) * 1000


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def median(values):
    return statistics.median(values) if values else float("nan")


def start_server(
    brain, port=None, immutable=False, log=subprocess.DEVNULL, options=(), env=None, python=("-m", "datasette")
):
    """`datasette serve` of `brain` on loopback, started and not waited for: (process, base url).
    `options` are more `datasette serve` arguments; `env` its environment; `python` what
    Python runs (its arguments before `serve`)."""
    if not port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    command = [sys.executable, *python, "serve", *(["-i"] if immutable else []), str(brain), *options]
    process = subprocess.Popen([*command, "-h", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log, env=env)
    return process, f"http://127.0.0.1:{port}"


def serve(brain, timeout=30, options=(), env=None):
    """Datasette serving `brain` on a free loopback port, once it answers: (process, base url)."""
    process, base = start_server(brain, options=options, env=env)
    deadline = time.perf_counter() + timeout
    while get(f"{base}/-/versions.json", timeout=1)[0] != 200:
        if process.poll() is not None or time.perf_counter() > deadline:
            stop(process)
            raise RuntimeError(f"datasette did not answer within {timeout} s (exit {process.returncode})")
        time.sleep(0.1)
    return process, base


def stop(process):
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def first_recall(process, url, query, started, timeout):
    """Seconds from `started` to the first answered recall, or None if the server exited
    or did not answer within `timeout` seconds of `started`."""
    while (left := started + timeout - time.perf_counter()) > 0 and process.poll() is None:
        if post(url, {"q": query}, timeout=left)[0] == 200:
            return time.perf_counter() - started
        time.sleep(0.02)
    return None


def working_copy(brain, prefix="brain-copy-", folder=None):
    """(folder, copy of `brain` in it, a read-only connection to the original): benchmarks
    that write work on a copy, so the brain they were given is never changed."""
    work = Path(folder) if folder else Path(tempfile.mkdtemp(prefix=prefix))
    source = sqlite3.connect(f"file:{Path(brain).resolve()}?mode=ro", uri=True)
    target = sqlite3.connect(work / "brain.db")
    source.backup(target)
    target.close()
    state = Path(f"{Path(brain).resolve()}-brainstate")
    if state.exists():  # the read state's snapshot: the copy holds the same rows, so it fits the copy too
        shutil.copyfile(state, work / "brain.db-brainstate")
    return work, work / "brain.db", source


def queries_from(path, n=None):
    return [json.loads(line)["text"] for line in open(path)][:n]


def clients(url, queries, count, until, timeout=60):
    """Recall from `count` threads until `until()` is true, each client taking every
    `count`-th query so that no two ask the same one: [(status, ms)]."""
    results = []

    def client(offset):
        i = offset
        while not until():
            results.append(post(url, {"q": queries[i % len(queries)], "k": 10}, timeout))
            i += count

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def summary(results, seconds=None):
    """(a line to print, p50 ms, p99 ms) of answered requests; the line counts the failed ones."""
    ok = [ms for status, ms in results if status == 200]
    line = f"p50 {median(ok):.1f} ms, p99 {percentile(ok, 99):.1f} ms, {len(results) - len(ok)} failed"
    return (f"{len(results) / seconds:.1f} recalls/s, " if seconds else "") + line, median(ok), percentile(ok, 99)


def memory_mb(pid):
    """(VmRSS, VmHWM) in MB of process `pid` and its descendants, summed: what serving costs."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    rss = hwm = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            fields = dict(line.split(":", 1) for line in open(f"/proc/{current}/status"))
        except OSError:
            continue
        rss += int(fields.get("VmRSS", "0 kB").split()[0])
        hwm += int(fields.get("VmHWM", "0 kB").split()[0])
    return rss / 1024, hwm / 1024
