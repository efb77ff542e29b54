"""Remember on a brain of many distinct scopes: what checking a new scope against
the brain's scopes (fields.ScopesAlike) costs.

    python3 bench/scopes.py [--records 20000] [--runs 5]
    python3 bench/scopes.py --brain B [--runs 5]      (a copy of B: it is written)

Builds a brain of --records memories, each in a scope of its own under a parent of
its own (/team{i}/project{i}: two distinct scopes a record), or copies --brain.
Then, in-process, one record at a time, the median seconds of remember:
at the root '/'; in a new ASCII scope; in a new scope outside ASCII (after the
write before it, so the brain's scopes are read again); and of a Cyrillic twin of an
ASCII scope, refused, with nothing written since the last check. Only the public
API is used, so another checkout's figures come from PYTHONPATH=OTHER.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import brain_sql


def build(path, records):
    conn = brain_sql.connect(path)
    for start in range(0, records, 1000):
        batch = [
            {"_id": f"s{i}", "text": f"Note {i} of project {i}.", "scope": f"/team{i}/project{i}"}
            for i in range(start, min(start + 1000, records))
        ]
        report, _ = brain_sql.remember(conn, batch)
        assert not report.errors, report.errors[:3]
    conn.close()


def copy(source, target):
    """A whole copy of the brain at `source` (SQLite's backup: the log's pages too)."""
    into = brain_sql.connect(target)
    brain_sql.connect(source, read_only=True).backup(into)
    into.close()


def timed(conn, record):
    started = time.perf_counter()
    report, _ = brain_sql.remember(conn, [record])
    return time.perf_counter() - started, [e.message for e in report.errors]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--brain")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="brain-scopes-")) / "brain.db"
    started = time.perf_counter()
    if args.brain:
        copy(args.brain, path)
    else:
        build(path, args.records)
    conn = brain_sql.connect(path)
    scopes = conn.execute("select count(distinct scope) from knowledge").fetchone()[0]
    print(f"brain: {scopes:,} distinct scopes ({time.perf_counter() - started:.1f} s to make)", file=sys.stderr)
    timed(conn, {"text": "warm the model", "scope": "/"})
    timed(conn, {"_id": "ace", "text": "The ace.", "scope": "/ace"})
    figures = {"root /": [], "new ASCII scope": [], "new scope outside ASCII": [], "twin refused": []}
    for run in range(args.runs):
        for name, record in (
            ("root /", {"text": f"Root note {run}.", "scope": "/"}),
            ("new ASCII scope", {"text": f"Note {run}.", "scope": f"/bench/ascii{run}"}),
            ("new scope outside ASCII", {"text": f"Заметка {run}.", "scope": f"/отдел{run}"}),
            ("twin refused", {"text": "x", "scope": "/\u0430\u0441\u0435"}),
        ):
            seconds, errors = timed(conn, record)
            assert bool(errors) == (name == "twin refused"), (name, errors)
            figures[name].append(seconds)
    for name, seconds in figures.items():
        print(f"{name:<26} median {statistics.median(seconds):.3f} s  max {max(seconds):.3f} s")


if __name__ == "__main__":
    main()
