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
import json
import os
import sys
import time

import brain_sql
from brain_sql import schema
from brain_sql.embed import get_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lock_watch  # noqa: E402


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
    get_model(args.model)  # loaded before timing
    with lock_watch.watched(args.db, schema) as seen:  # reindex's transactions, whichever module opens them
        started = time.perf_counter()
        written = brain_sql.reindex(conn, args.model)
        seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "code": os.path.dirname(os.path.dirname(brain_sql.__file__)),
                "memories": memories,
                "written": written,
                "seconds": round(seconds, 2),
                **lock_watch.figures(seen),
            }
        )
    )


if __name__ == "__main__":
    main()
