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
import json
import os
import sys
import tempfile
import time

import brain_sql
from brain_sql import for_plugin, pipeline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lock_watch  # noqa: E402


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
    prepared = for_plugin.prepare_remember(conn, [record(args.chunks, args.names)])  # embedded first
    with lock_watch.watched(path, pipeline) as seen:  # the remember's transactions
        started = time.perf_counter()
        report, _ = pipeline.write_remember(conn, prepared)
        while getattr(pipeline, "finish_remember", lambda *_: False)(conn, report):  # a checkout before it: one
            pass
        seconds = time.perf_counter() - started
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
                **lock_watch.figures(seen),
            }
        )
    )


if __name__ == "__main__":
    main()
