"""Writing conversation turns into a big brain, against another checkout's code.

    python3 bench/turns.py --brain /work/scale/b50k/brain.db [--baseline /tmp/main] [--turns 1000] [--repeat 2]

Each run is a fresh process with the model loaded before the clock starts, on a copy
of `--brain` (the tree's migrations run on the copy first, outside the clock):
- remember: one `remember` call of a 20-turn session;
- correct: a turn of it corrected with `remember` (its quotes in the turns after it
  restated), the median of 10;
- rewrite: `--turns` turns of one session ingested from a file into a new brain, then
  the file ingested again with every turn changed (every quote restated);
- grow: `--turns` turns remembered one call at a time into one session of that brain,
  the median call of the last tenth (the session then holds nine tenths of them).
The first two grow with the brain when a turn's session is found by reading every
memory; the last two with the session when each turn written reads the whole session.
With `--baseline TREE` the same runs go through that tree's code too, alternating; the
ratio is the baseline's seconds over the tree's (above 1: the tree is faster).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from harness import in_tree, median, working_copy  # noqa: E402

CHILD = """
import json, os, statistics, sys, time
import brain_sql
from brain_sql.embed import embed
from brain_sql.config import DEFAULT_MODEL
brain, folder, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
embed(["warm up"], DEFAULT_MODEL)
conn = brain_sql.connect(brain)
brain_sql.migrate(conn)

def turn(i, text):
    return {"_id": f"t{i}", "text": text, "metadata": {"speaker": ["Ann", "Bo"][i % 2], "session_id": "bench-trip"}}

started = time.perf_counter()
report, _ = brain_sql.remember(conn, [turn(i, f"Turn {i} about the boat trip {i % 5}.") for i in range(20)])
remembered = time.perf_counter() - started
assert not report.errors, report.errors[:3]
corrections = []
for k in range(10):
    started = time.perf_counter()
    report, _ = brain_sql.remember(conn, [turn(5, f"Turn 5, corrected {k}.")])
    corrections.append(time.perf_counter() - started)
    assert not report.errors, report.errors[:3]
path = os.path.join(folder, "chat.jsonl")

def transcript(words):
    with open(path, "w", encoding="utf-8") as out:
        for i in range(turns):
            out.write(json.dumps({"_id": f"c{i}", "speaker": ["Ann", "Bo"][i % 2], "session_id": "s1",
                                  "text": f"Turn {i} words about {words} {i % 7}."}) + "\\n")

small = brain_sql.connect(os.path.join(folder, "small.db"))
transcript("the thing")
brain_sql.ingest(small, [path])
transcript("another thing")
started = time.perf_counter()
report = brain_sql.ingest(small, [path])
rewritten = time.perf_counter() - started
assert report.documents_updated == turns, report
calls = []
for i in range(turns):
    started = time.perf_counter()
    report, _ = brain_sql.remember(small, [{"_id": f"g{i}", "text": f"Turn {i} of a long chat {i % 7}.",
                                            "metadata": {"speaker": ["Ann", "Bo"][i % 2], "session_id": "grown"}}])
    calls.append(time.perf_counter() - started)
    assert not report.errors, report.errors[:3]
print(json.dumps({"code": brain_sql.__file__, "remember": remembered, "correct": statistics.median(corrections),
                  "rewrite": rewritten, "grow": statistics.median(calls[-max(turns // 10, 1):])}))
"""


def run(tree, brain, turns):
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as folder:
        _, copy, source = working_copy(brain, folder=folder)  # its write-ahead log's pages too
        source.close()
        return in_tree(tree, CHILD, [copy, folder, turns], cwd=folder)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brain", required=True, help="the brain the turns are written beside (copied)")
    parser.add_argument("--tree", default=str(ROOT))
    parser.add_argument("--baseline", help="another checkout, measured in turn")
    parser.add_argument("--turns", type=int, default=1000, help="turns of the session rewritten")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    trees = {"tree": Path(args.tree).resolve()}
    if args.baseline:
        trees["baseline"] = Path(args.baseline).resolve()
    results = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            figures = run(tree, args.brain, args.turns)
            results[name].append(figures)
            print(name, json.dumps({k: round(v, 4) for k, v in figures.items() if k != "code"}), flush=True)
    summary = {
        name: {key: median([r[key] for r in runs]) for key in ("remember", "correct", "rewrite", "grow")}
        for name, runs in results.items()
    }
    for name, figures in summary.items():
        print(
            f"{name}: remember 20 turns {figures['remember']:.3f} s, correct one {figures['correct'] * 1000:.1f} ms, "
            f"rewrite {args.turns} turns {figures['rewrite']:.2f} s, "
            f"remember one turn into a session of {args.turns} {figures['grow'] * 1000:.1f} ms"
        )
    if args.baseline:
        ratios = {key: summary["baseline"][key] / summary["tree"][key] for key in summary["tree"]}
        print("speed-up (baseline seconds / tree seconds):", json.dumps({k: round(v, 2) for k, v in ratios.items()}))


if __name__ == "__main__":
    main()
