"""The speed gate: recall p50 and ingest rate of this checkout against another's, in one run.

    python3 bench/gate.py --baseline /tmp/main [--brain BRAIN] [--queries 200] [--repeat 3]
                          [--scifact 20000] [--entity-rich 6000] [--data ../shared/data]

Before an issue is resolved its branch is compared with main on the same machine at the
same time (the machine is shared: only ratios taken in one run mean anything):
- recall: bench/recall.py's in-process p50 over `--queries` SciFact queries, each tree in
  its own process on its own copy of `--brain` (a tree may migrate its copy), the trees
  alternating `--repeat` times; the best p50 of each is compared;
- server recall: the same through Datasette's ASGI app (bench/asgi_recall.py), so
  that what the plugin adds to a recall (its permission checks among it) is gated too,
  alone and beside another plugin with permission rules (then every table recall
  reads is asked of);
- ingest: bench/ingest_scale.py's SciFact-style and entity-rich ingests, which alternate
  the trees themselves.
A ratio over 1.10 (10% slower) is flagged: fix it or explain it in the closing note.
"""

import argparse
import compileall
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1.10


def recall_p50(tree, brain, queries, data):
    """One bench/recall.py run of `tree`'s code on `brain`: its full recall p50 in ms."""
    return _p50(Path(tree) / "bench/recall.py", r"full recall:\s+p50 ([\d.]+) ms", tree, brain, queries, data)


def asgi_p50(tree, brain, queries, data, *options):
    """bench/asgi_recall.py (this checkout's script) run on `tree`'s code: recall p50
    in ms through Datasette's ASGI app, what a server adds to recall included."""
    script = ROOT / "bench/asgi_recall.py"
    return _p50(script, r"asgi recall: p50 ([\d.]+) ms", tree, brain, queries, data, *options)


def asgi_plugin_p50(tree, brain, queries, data):
    """asgi_p50 with another plugin answering permission_allowed (every table recall reads asked)."""
    return asgi_p50(tree, brain, queries, data, "--another-plugin")


def _p50(script, said, tree, brain, queries, data, *options):
    """The p50 `script` prints (`said` finds it) on `brain`, run with `tree`'s code (the
    plugin's entry point imports the tree's package too)."""
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            "--brain",
            str(brain),
            "--queries",
            str(queries),
            "--query-file",
            str(data / "scifact/queries.jsonl"),
            *options,
        ],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(re.search(said, result.stdout).group(1))


def verdict(ratio):
    return "slower: over the gate" if ratio > LIMIT else "within the gate"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the other checkout (e.g. a worktree of main)")
    parser.add_argument("--tree", default=str(ROOT), help="the checkout under test (default: this one)")
    parser.add_argument("--brain", default="/work/scale/b50k/brain.db", help="a brain to recall from (copied)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scifact", type=int, default=20000)
    parser.add_argument("--entity-rich", type=int, default=6000)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data"), help="the evaluation data folder")
    args = parser.parse_args()
    data = Path(args.data)
    trees = {"tree": Path(args.tree).resolve(), "baseline": Path(args.baseline).resolve()}
    for tree in trees.values():  # byte-compiled first, as pip installs a package: no run pays for compiling
        compileall.compile_dir(str(tree / "brain_sql"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as work:
        copies = {}
        for name in trees:
            copies[name] = Path(work) / f"{name}.db"
            shutil.copy(args.brain, copies[name])
            snapshot = Path(args.brain + "-brainstate")
            if snapshot.exists():
                shutil.copy(snapshot, str(copies[name]) + "-brainstate")
        measures = (
            ("recall p50", recall_p50),
            ("server recall p50 (ASGI)", asgi_p50),
            ("server recall p50 (ASGI, another plugin's permission rules)", asgi_plugin_p50),
        )
        for label, measure in measures:
            best = {name: [] for name in trees}
            for _ in range(args.repeat):
                for name, tree in trees.items():
                    best[name].append(measure(tree, copies[name], args.queries, data))
            ratio = min(best["tree"]) / min(best["baseline"])
            print(
                f"{label} (ms, best of {args.repeat}): tree {min(best['tree']):.1f} {best['tree']}, "
                f"baseline {min(best['baseline']):.1f} {best['baseline']}; ratio {ratio:.2f} ({verdict(ratio)})",
                flush=True,
            )
    ingest = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/ingest_scale.py"),
            "--tree",
            str(trees["tree"]),
            "--baseline",
            str(trees["baseline"]),
            "--scifact",
            str(args.scifact),
            "--entity-rich",
            str(args.entity_rich),
            "--repeat",
            "2",
            "--corpus",
            str(data / "scifact/corpus.jsonl"),
            "--multihop",
            str(data / "multihop-sample/hipporag-legacy-train"),
        ],
        capture_output=True,
        text=True,
    )
    print(ingest.stdout, ingest.stderr[-2000:] if ingest.returncode else "", sep="", end="")


if __name__ == "__main__":
    main()
