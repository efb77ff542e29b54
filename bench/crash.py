"""Crash safety: kill `sqlite-utils brain ingest` with SIGKILL at random points,
check the file after each kill, then finish the ingest and compare the brain
with one ingested without interruption.

    python3 bench/crash.py [--kills 20] [--records 1500] [--work DIR]

Every kill interrupts an ingest with work to do: into a fresh brain, or (every
other kill) over a full brain built from edited data. After each kill:
PRAGMA integrity_check passes, the full-text index and the vectors agree with
knowledge (same rowids), and no document is half-written (brain_sql.check finds
nothing but queued mention work or migrations not yet applied, which the next
run finishes). Then the ingest is run again to the end, and the brain must hold
exactly what an uninterrupted ingest holds. Exits 1 on any failure.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import brain_sql
from brain_sql.consistency import check, fingerprint


def corpus(folder, n, edit=False):
    """n records and 30 linked notes; `edit` changes every third record and drops the last tenth."""
    rng = random.Random(5)
    words = "pager rota support escalation vendor policy graph vector memory recall note".split()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "records.jsonl", "w") as out:
        for i in range(n):
            record = {
                "_id": f"r{i}",
                "title": f"Record {i}",
                "text": " ".join(rng.choice(words) for _ in range(60)),
                "tags": [rng.choice(words)],
                "entities": [f"Record {(i * 7) % n}"],
            }
            if edit and i % 3 == 0:
                record["text"] += " edited"
            if not (edit and i >= n * 0.9):
                out.write(json.dumps(record) + "\n")
    (folder / "notes").mkdir(exist_ok=True)
    for i in range(30):
        (folder / "notes" / f"Note {i}.md").write_text(f"# Note {i}\n\nAbout [[Note {(i + 1) % 30}]] and Record {i}.\n")
    return folder


def ingest(db, data):
    return subprocess.Popen(
        [sys.executable, "-m", "sqlite_utils", "brain", "ingest", str(db), str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--work", default=None)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="brain-crash-"))
    original = corpus(work / "original", args.records)
    edited = corpus(work / "edited", args.records, edit=True)
    data = work / "data"  # every ingest reads this folder, so document ids match

    def place(source):
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(source, data)

    place(original)
    started = time.perf_counter()
    assert ingest(work / "reference.db", data).wait() == 0
    full = time.perf_counter() - started
    reference = fingerprint(brain_sql.connect(work / "reference.db"))
    rng = random.Random(args.seed)
    failures = 0
    for kill in range(1, args.kills + 1):
        # every kill interrupts an ingest with work to do: a fresh brain, or
        # (every other time) a full one being re-ingested with edited data
        db = work / f"killed-{kill}.db"
        if kill % 2 == 0:
            place(edited)
            assert ingest(db, data).wait() == 0
            place(original)
        process = ingest(db, data)
        delay = rng.uniform(0.3, full)
        time.sleep(delay)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        conn = brain_sql.connect(db)
        problems = check(conn)
        pending = len(problems.pop("pending_mentions", []))
        problems.pop("pending_migrations", None)  # killed while creating the schema: each step is atomic
        chunks = conn.execute("select count(*) from knowledge").fetchone()[0] if "knowledge" in tables(conn) else 0
        conn.close()
        assert ingest(db, data).wait() == 0
        conn = brain_sql.connect(db)
        converged = not check(conn) and fingerprint(conn) == reference
        conn.close()
        ok = not problems and converged
        failures += not ok
        print(
            f"kill {kill:2d} after {delay:4.1f}s{' (re-ingest)' if kill % 2 == 0 else ''}: {chunks} chunks, "
            f"{pending} mentions queued; consistent {not problems}; converged {converged}"
        )
    print(f"{args.kills} kills, {failures} failed; an uninterrupted ingest takes {full:.1f}s; files in {work}")
    sys.exit(1 if failures else 0)


def tables(conn):
    return {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}


if __name__ == "__main__":
    main()
