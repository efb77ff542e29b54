"""How long `reindex` holds the brain's write lock, and how long another writer waits.

    python bench/reindex_lock.py COPY.db MODEL [--keep N]

Reindexes COPY.db (written: give it a copy) to MODEL, timing each outermost write
transaction reindex takes (brain_sql.schema's atomic), while a thread takes and
releases the write lock every 50 ms as a writer would (BEGIN IMMEDIATE, 30 s busy
timeout) and records how long it waited. `--keep N` first cuts the brain to its
first N memories (plain SQL). Prints one JSON line. Run it against two checkouts
(PYTHONPATH) for a before/after.
"""

import argparse
import contextlib
import json
import os
import sys
import threading
import time

import brain_sql
from brain_sql import connection, schema
from brain_sql.embed import get_model
from brain_sql.errors import BrainBusy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("model")
    parser.add_argument("--keep", type=int)
    args = parser.parse_args()
    conn = brain_sql.connect(args.db)
    if args.keep:
        conn.execute(
            "delete from knowledge where id > (select id from knowledge order by id limit 1 offset ?)", [args.keep - 1]
        )
        conn.execute("pragma wal_checkpoint(truncate)")
    schema.migrate(conn)  # any migration pending is not reindex's
    memories = conn.execute("select count(*) from knowledge").fetchone()[0]
    holds, waits, gave_up, stop = [], [], [], threading.Event()
    real = connection.atomic

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
            holds.append((time.perf_counter() - began, caller))

    def writer():
        other = brain_sql.connect(args.db)
        other.execute("pragma busy_timeout = 30000")
        while not stop.is_set():
            started = time.perf_counter()
            try:
                with real(other):  # as remember takes the lock
                    pass
            except BrainBusy:  # waited the whole busy timeout: a 503 over HTTP
                gave_up.append(1)
            waits.append(time.perf_counter() - started)
            time.sleep(0.05)

    schema.atomic = connection.atomic = timed  # reindex's transactions, whichever module opens them
    get_model(args.model)  # loaded before timing
    thread = threading.Thread(target=writer)
    thread.start()
    started = time.perf_counter()
    written = brain_sql.reindex(conn, args.model)
    seconds = time.perf_counter() - started
    stop.set()
    thread.join()
    print(
        json.dumps(
            {
                "code": os.path.dirname(os.path.dirname(brain_sql.__file__)),
                "memories": memories,
                "written": written,
                "seconds": round(seconds, 2),
                "transactions": len(holds),
                "longest_hold": round(max(holds)[0], 3),
                "longest_by": max(holds)[1],
                "holds_median": round(sorted(holds)[len(holds) // 2][0], 3),
                "longest_by_caller": {
                    name: round(max(h for h, c in holds if c == name), 3) for name in {c for _, c in holds}
                },
                "writer_longest_wait": round(max(waits), 3),
                "writer_waits": len(waits),
                "writer_gave_up": len(gave_up),
                "load": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
