"""Recall of queries holding phrases and code paths: seconds per query on a brain,
this checkout against another in the same run (each tree in its own process, on
the same file opened read-only), with ratios and whether the hits are the same.

    python3 bench/phrases.py --brain /work/scale/m1/brain.db [--baseline TREE] [--runs 2]

The queries are those a hostile review used (review 101: 200 quoted phrases of
common words held a server's slots for 26 s at 50,000 memories) and ordinary ones.
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the of and in a to".split()
QUERIES = {
    "one phrase of common words": '"of the" results',
    "a phrase with a rarer word": '"the patient" outcomes',
    "a phrase of four words": '"in the present study"',
    "8 frequent phrases": '"risk factors" "human disease" "control group" "gene expression" "cell lines" '
    '"immune response" "signaling pathway" "breast cancer"',
    "8 phrases of stop words": '"in this study" "we found that" "is associated with" "as well as" '
    '"in patients with" "the role of" "in addition" "compared with"',
    "200 quoted phrases of common words": " ".join('"' + " ".join(t) + '"' for t in itertools.product(WORDS, repeat=3))[
        :2000
    ],
    "2,000 characters of the.of.and": " ".join(".".join(t) for t in itertools.product(WORDS, repeat=3))[:2000],
}

RUN = """
import json, sys, time
import brain_sql
conn = brain_sql.connect(sys.argv[1], read_only=True)
brain_sql.recall(conn, brain_sql.querydoc_from_strings({"q": "warm up"}))
out = {}
for name, q in json.loads(sys.argv[2]).items():
    best, hits = None, None
    for _ in range(int(sys.argv[3])):
        started = time.perf_counter()
        result = brain_sql.recall(conn, brain_sql.querydoc_from_strings({"q": q, "k": "10"}))
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
        hits = [hit["id"] for hit in result["hits"]]
    out[name] = {"seconds": best, "hits": hits}
print(json.dumps(out))
"""


def measure(tree, brain, queries, runs, timeout):
    """{query name: {seconds, hits}} from the code at `tree`, or None past `timeout`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN, brain, json.dumps(queries), str(runs)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brain", required=True)
    parser.add_argument("--baseline", help="another checkout's root, measured in the same run")
    parser.add_argument("--runs", type=int, default=2, help="runs of each query; the best is kept")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a tree may take for one query")
    args = parser.parse_args()
    trees = [("tree", ROOT)] + ([("baseline", Path(args.baseline))] if args.baseline else [])
    print(
        f"{'query':38s} "
        + " ".join(f"{name:>10s}" for name, _ in trees)
        + ("   ratio  same hits" if args.baseline else "")
    )
    for name, q in QUERIES.items():
        found = {label: measure(tree, args.brain, {name: q}, args.runs, args.timeout) for label, tree in trees}
        cells = [
            f"{found[label][name]['seconds']:9.3f}s" if found[label] else f"{'>' + str(int(args.timeout)) + 's':>10s}"
            for label, _ in trees
        ]
        line = f"{name:38s} " + " ".join(cells)
        if args.baseline and found["tree"] and found["baseline"]:
            ratio = found["tree"][name]["seconds"] / found["baseline"][name]["seconds"]
            line += f"  {ratio:6.2f}  {found['tree'][name]['hits'] == found['baseline'][name]['hits']}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
