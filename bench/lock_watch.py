"""What the write-lock benchmarks share (reindex_lock.py, remember_lock.py): each
outermost write transaction timed, with what opened it, while another writer takes
and releases the lock every 50 ms and its waits are timed."""

import contextlib
import os
import sys
import threading
import time

import brain_sql
from brain_sql import connection
from brain_sql.errors import BrainBusy


@contextlib.contextmanager
def watched(path, *modules):
    """Inside the block, brain_sql's `atomic` (connection's, and the name in each of
    `modules`, which imported it) times each outermost transaction as (seconds, the
    function that opened it), while another connection to `path` takes the write
    lock every 50 ms as a remember does (BEGIN IMMEDIATE, 30 s busy timeout). Yields
    {"holds": [...], "waits": [seconds], "gave_up": count}, complete once it ends."""
    seen = {"holds": [], "waits": [], "gave_up": 0}
    real, stop = connection.atomic, threading.Event()

    @contextlib.contextmanager
    def timed(c, bulk=False):
        outermost, frame = not c.in_transaction, sys._getframe(1)
        while frame.f_code.co_name in ("__enter__", "turn"):  # the method that opened it
            frame = frame.f_back
        caller = frame.f_code.co_name
        with real(c, bulk) as inside:
            began = time.perf_counter()
            yield inside
        if outermost:
            seen["holds"].append((time.perf_counter() - began, caller))

    def writer():
        other = brain_sql.connect(path)
        other.execute("pragma busy_timeout = 30000")
        while not stop.is_set():
            started = time.perf_counter()
            try:
                with real(other):
                    pass
            except BrainBusy:  # waited the whole busy timeout: a 503 over HTTP
                seen["gave_up"] += 1
            seen["waits"].append(time.perf_counter() - started)
            time.sleep(0.05)

    patched = [connection, *modules]
    for module in patched:
        module.atomic = timed
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
        for module in patched:
            module.atomic = real


def figures(seen):
    """The JSON fields both benchmarks print of what `watched` saw."""
    holds, waits = seen["holds"], seen["waits"]
    return {
        "transactions": len(holds),
        "longest_hold": round(max(holds)[0], 3),
        "longest_by": max(holds)[1],
        "holds_median": round(sorted(holds)[len(holds) // 2][0], 3),
        "longest_by_caller": {name: round(max(h for h, c in holds if c == name), 3) for name in {c for _, c in holds}},
        "writer_longest_wait": round(max(waits), 3),
        "writer_waits": len(waits),
        "writer_gave_up": seen["gave_up"],
        "load": os.getloadavg()[0],
    }
