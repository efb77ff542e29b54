"""Recall over long conversation sessions, against another checkout's code.

    python3 bench/sessions.py --brain DIR/sessions.db [--sessions 20] [--turns 2500] [--baseline TREE] [--repeat 2]

Builds (once, then reuses) a brain of `--sessions` sessions of `--turns` turns each,
their texts and speakers drawn from `locomo-dev`'s conv-26 (a chat export or a
long-running agent thread is one session of thousands of turns), then asks conv-26's
questions of it in a fresh process per run, the model and the read state loaded before
the clock starts: recall p50 and p95, and the median of each timed step (`named_ms`:
the entities the question names, its speakers among them). With `--baseline TREE`
the same runs go through that tree's code too, alternating; the ratio is the
baseline's p50 over the tree's (above 1: the tree is faster).
"""

import argparse
import json
import random
import sys
from pathlib import Path

import brain_sql

ROOT = Path(__file__).resolve().parent.parent
CONVERSATION = ROOT.parent / "shared/data/locomo-dev/conv-26"
sys.path.insert(0, str(ROOT / "bench"))
from harness import in_tree, median, percentile  # noqa: E402

CHILD = """
import json, sys, time
import brain_sql
brain, questions = sys.argv[1], json.loads(sys.argv[2])
conn = brain_sql.connect(brain)
for question in questions[:5]:  # the read state, the model and SQLite's pages warm
    brain_sql.recall(conn, {"q": question})
times, steps = [], {}
for question in questions:
    started = time.perf_counter()
    result = brain_sql.recall(conn, {"q": question, "k": 10})
    times.append(time.perf_counter() - started)
    for name, value in result["telemetry"].items():
        if name.endswith("_ms"):
            steps.setdefault(name, []).append(value)
print(json.dumps({"code": brain_sql.__file__, "times": times, "steps": steps}))
"""


def build(path, sessions, turns):
    """The brain at `path`, ingested from a transcript of `sessions` x `turns` turns."""
    said = [json.loads(line) for line in open(CONVERSATION / "corpus.jsonl", encoding="utf-8") if line.strip()]
    rng = random.Random(7)
    transcript = path.with_suffix(".jsonl")
    with open(transcript, "w", encoding="utf-8") as out:
        for s in range(sessions):
            for i in range(turns):
                turn = rng.choice(said)
                record = {"_id": f"S{s}:{i}", "text": turn["text"], "speaker": turn["speaker"]}
                record |= {"session_id": f"long/{s}", "observed_at": f"2023-{1 + s % 12:02d}-{1 + s % 28:02d}T10:00"}
                out.write(json.dumps(record) + "\n")
    conn = brain_sql.connect(path)
    report = brain_sql.ingest(conn, [transcript])
    assert not report.errors, report.errors[:3]
    conn.close()


def run(tree, brain, questions):
    return in_tree(tree, CHILD, [brain, json.dumps(questions)])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brain", required=True, help="built here when it does not exist, else reused")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=2500, help="turns a session")
    parser.add_argument("--tree", default=str(ROOT))
    parser.add_argument("--baseline", help="another checkout, measured in turn")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    brain = Path(args.brain)
    if not brain.exists():
        build(brain, args.sessions, args.turns)
    questions = [json.loads(line)["text"] for line in open(CONVERSATION / "queries.jsonl", encoding="utf-8")]
    trees = {"tree": Path(args.tree).resolve()}
    if args.baseline:
        trees["baseline"] = Path(args.baseline).resolve()
    p50 = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            figures = run(tree, brain, questions)
            times = [1000 * t for t in figures["times"]]
            p50[name].append(median(times))
            steps = {step: round(median(values), 1) for step, values in figures["steps"].items()}
            print(f"{name}: p50 {median(times):.1f} ms, p95 {percentile(times, 95):.1f} ms; steps {steps}", flush=True)
    if args.baseline:
        ratio = median(p50["baseline"]) / median(p50["tree"])
        print(
            f"recall p50: tree {median(p50['tree']):.1f} ms, baseline {median(p50['baseline']):.1f} ms; "
            f"speed-up {ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
