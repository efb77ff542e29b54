"""Ingest speed by kind of text and by brain size, against another checkout's code.

    python3 bench/ingest_scale.py [--tree .] [--baseline /tmp/main] [--scifact 20000] [--entity-rich 6000]
                                  [--into BRAIN --small 100] [--slices 0] [--repeat 2]

Each figure is one `brain_sql.ingest` in a fresh process, with the model loaded
before the clock starts; its CPU seconds are printed beside the records/s (on a
shared machine they vary less than the wall clock):
- scifact: N SciFact-style records (bench/ingest.py's make_records) into a new brain;
- entity-rich: N passages of the HippoRAG MuSiQue and HotpotQA training corpora, titled
  (each title a document entity, each title named in a passage a `mentions` edge),
  repeated with numbered titles ("Title 2") past the ~2,900 there are;
- small: `--small` new SciFact-style records into the brain `--into`, which grows by each
  run's records (give it a copy of a big brain: cp /work/scale/brain-1m.db /tmp/big.db);
- slices: `--slices N` ingests N SciFact-style records, then N more, and so on `--repeat`
  times into one new brain: records/s of each slice, flat when nothing grows with size.
The code measured is `--tree`'s brain_sql (default: this checkout). With `--baseline TREE`
(another checkout, e.g. `git worktree add --detach /tmp/main main`), the same runs go
through that tree's too, alternating, and the ratio is the first's records/s over the
baseline's (the best of `--repeat` runs each).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared/data"
sys.path.insert(0, str(ROOT / "bench"))

from ingest import make_records  # noqa: E402

# Run in a child process with PYTHONPATH set to the tree under test: ingest one file
# into one brain, print records/s.
CHILD = """
import json, sys, time, resource
import brain_sql
from brain_sql.embed import embed
from brain_sql.config import DEFAULT_MODEL
brain, records = sys.argv[1], sys.argv[2]
embed(["warm up"], DEFAULT_MODEL)
conn = brain_sql.connect(brain)
brain_sql.migrate(conn)
count = sum(1 for _ in open(records, encoding="utf-8"))
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
started, cpu_started = time.perf_counter(), cpu()
report = brain_sql.ingest(conn, [records])
seconds, cpu_seconds = time.perf_counter() - started, cpu() - cpu_started
assert not report.errors, report.errors[:3]
print(json.dumps({"code": brain_sql.__file__, "records": count, "seconds": seconds, "rate": count / seconds,
                  "cpu": cpu_seconds,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "entities": report.entities, "relationships": report.relationships}))
"""


def entity_rich(count, data):
    """`count` title + text passages of the multi-hop corpora, repeated with numbered titles."""
    corpus = [(p["title"], p["text"]) for p in json.load(open(data / "musique_train_corpus.json"))]
    corpus += [(t, "".join(s)) for t, s in json.load(open(data / "hotpotqa_train_corpus.json")).items()]
    for i in range(count):
        title, text = corpus[i % len(corpus)]
        copy = i // len(corpus)
        yield {"_id": f"e{i}", "title": f"{title} {copy + 1}" if copy else title, "text": text}


def write(path, records):
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return path


def run(tree, brain, records):
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # run from the records' folder: `python -c` puts the working folder first on sys.path
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(brain), str(records)],
        env=env,
        cwd=Path(records).parent,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"{tree}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"].startswith(str(Path(tree).resolve())), f"{result['code']} is not {tree}'s brain_sql"
    return result


def fresh(work, tree, name, records):
    """records/s of ingesting `records` into a new brain with `tree`'s code."""
    brain = work / f"{name}-{Path(tree).name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{brain}{suffix}").unlink(missing_ok=True)
    return run(tree, brain, records)


def compare(label, trees, repeat, measure):
    """Best of `repeat` runs of measure(tree, i) for each tree, alternating trees."""
    best = {}
    for i in range(repeat):
        for tree in trees:
            result = measure(tree, i)
            print(
                f"  {label} {Path(tree).name} run {i + 1}: {result['rate']:,.0f} records/s "
                f"({result['records']:,} in {result['seconds']:.2f} s, CPU {result['cpu']:.2f} s, "
                f"peak RSS {result['rss_mb']:,.0f} MB)",
                flush=True,
            )
            if tree not in best or result["rate"] > best[tree]["rate"]:
                best[tree] = result
    line = f"{label}: " + ", ".join(f"{Path(t).name} {best[t]['rate']:,.0f} records/s" for t in trees)
    if len(trees) == 2:
        line += f"; ratio {best[trees[0]]['rate'] / best[trees[1]]['rate']:.2f}"
    print(line, flush=True)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose brain_sql to measure (default: this one)")
    parser.add_argument("--baseline", help="another checkout whose brain_sql to measure beside it")
    parser.add_argument("--scifact", type=int, default=20_000, help="SciFact-style records (0: skip)")
    parser.add_argument("--entity-rich", type=int, default=6_000, help="multi-hop passages (0: skip)")
    parser.add_argument("--into", help="a brain to ingest --small records into; it is written to: give a copy")
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--slices", type=int, default=0, help="records per slice into one growing brain (0: skip)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--corpus", default=str(DATA / "scifact/corpus.jsonl"))
    parser.add_argument("--multihop", default=str(DATA / "multihop-sample/hipporag-legacy-train"))
    parser.add_argument("--work", help="folder for the brains (default: a new temporary one)")
    args = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in (args.tree, args.baseline) if t]
    work = Path(args.work or tempfile.mkdtemp(prefix="brain-ingest-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.scifact:
            records = write(work / "scifact.jsonl", make_records(args.corpus, args.scifact))
            compare("scifact", trees, args.repeat, lambda tree, i: fresh(work, tree, "scifact", records))
        if args.entity_rich:
            records = write(work / "entity-rich.jsonl", entity_rich(args.entity_rich, Path(args.multihop)))
            compare("entity-rich", trees, args.repeat, lambda tree, i: fresh(work, tree, "entity-rich", records))
        if args.into:
            # new records each run (ids of this run alone, in a file of their own, so no
            # run prunes another's), sentences drawn apart from bench/ingest.py's
            tag = os.urandom(4).hex()
            pool = iter(make_records(args.corpus, args.small * args.repeat * len(trees), seed=int(tag, 16)))

            def small(tree, i):
                batch = [{**next(pool), "_id": f"small-{tag}-{i}-{n}"} for n in range(args.small)]
                return run(tree, args.into, write(work / f"small-{tag}-{i}-{Path(tree).name}.jsonl", batch))

            compare(f"{args.small} records into {Path(args.into).name}", trees, args.repeat, small)
        if args.slices:
            for tree in trees:
                brain = work / f"slices-{Path(tree).name}.db"
                pool = make_records(args.corpus, args.slices * args.repeat)
                for i in range(args.repeat):
                    batch = [next(pool) for _ in range(args.slices)]
                    result = run(
                        tree, brain, write(work / f"slice-{i}.jsonl", batch)
                    )  # a file each: none prunes another
                    print(
                        f"  slices {Path(tree).name}: records {i * args.slices:,}-{(i + 1) * args.slices:,}: "
                        f"{result['rate']:,.0f} records/s, CPU {result['cpu'] / args.slices * 1e3:.2f} ms a record",
                        flush=True,
                    )
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
