"""How long a remember whose text names many entities holds the write lock, and how
long another writer waits meanwhile.

    python bench/remember_lock.py [--into COPY.db] [--chunks 1000] [--names 130]

Remembers one record of `--chunks` memories stating 1,000 entities, each memory
naming `--names` of them (review 152's 1 MB remember: 1,000 x 130, 130,870 mention
edges), into a new brain or into COPY.db (written: give it a copy), timing each
outermost write transaction (brain_sql.connection's atomic) while a thread takes
and releases the write lock every 50 ms as a writer would (BEGIN IMMEDIATE) and
records how long it waited. Prints one JSON line. Run it against two checkouts
(PYTHONPATH) for a before/after.
"""

import argparse
import contextlib
import json
import os
import tempfile
import threading
import time

import brain_sql
from brain_sql import connection, for_plugin, pipeline


def record(chunks, named):
    names = [f"Zq{j:04d}" for j in range(1000)]
    parts = [{"content": " ".join(names[(i * named + k) % 1000] for k in range(named))} for i in range(chunks)]
    return {"_id": "many-names", "title": "Many names", "entities": names, "_chunks": parts}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--into")
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--names", type=int, default=130)
    args = parser.parse_args()
    path = args.into or os.path.join(tempfile.mkdtemp(), "brain.db")
    conn = brain_sql.connect(path)
    brain_sql.migrate(conn)
    holds, waits, stop = [], [], threading.Event()
    real = connection.atomic

    @contextlib.contextmanager
    def timed(c, bulk=False):
        outermost = not c.in_transaction
        with real(c, bulk) as inside:
            began = time.perf_counter()
            yield inside
        if outermost:
            holds.append(time.perf_counter() - began)

    def writer():
        other = brain_sql.connect(path)
        while not stop.is_set():
            started = time.perf_counter()
            with real(other):  # as a remember takes the lock
                pass
            waits.append(time.perf_counter() - started)
            time.sleep(0.05)

    pipeline.atomic = connection.atomic = timed  # the remember's transactions
    prepared = for_plugin.prepare_remember(conn, [record(args.chunks, args.names)])  # embedded first
    thread = threading.Thread(target=writer)
    thread.start()
    started = time.perf_counter()
    report, _ = pipeline.write_remember(conn, prepared)
    while getattr(pipeline, "finish_remember", lambda *_: False)(conn, report):  # a checkout before it: one
        pass
    seconds = time.perf_counter() - started
    stop.set()
    thread.join()
    print(
        json.dumps(
            {
                "code": os.path.dirname(os.path.dirname(brain_sql.__file__)),
                "chunks": args.chunks,
                "names_a_chunk": args.names,
                "mention_edges": conn.execute(
                    "select count(*) from relationships where relation_type = 'mentions'"
                ).fetchone()[0],
                "left_queued": conn.execute("select count(*) from brain_mention_queue").fetchone()[0],
                "seconds": round(seconds, 2),
                "transactions": len(holds),
                "longest_hold": round(max(holds), 3),
                "writer_longest_wait": round(max(waits), 3),
                "writer_waits": len(waits),
                "load": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
