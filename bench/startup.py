"""Start-up time (issues 19 and 21): cold processes, each row's median over --runs rounds.

    python3 bench/startup.py [--runs 7] [--brain DB [--no-copy]] [--compare ROOT]

Every command is a new Python process of this interpreter (not a pyenv shim, whose bash
adds its own start), run with PYTHONPATH at the code measured, and timed from its start
to its exit. Rounds run every row once, in turn, so that a machine whose load changes
changes every row alike. Rows:

- `python -c pass`: the floor of any command.
- `sqlite-utils --help` and `--version`, with the plugin and without it: the console
  script's code, once as it is and once with pluggy told to skip the `brain` entry point
  (so the scan of the entry points still happens, and any other plugin still loads); the
  plugin's share is the median of the rounds' differences.
- `sqlite-utils brain --help`, and `sqlite-utils brain recall demo.db "who owns the
  support runbook?"` on the README's demo brain (docs/vault, ingested once per code).
- With --brain DB: `datasette serve` of a copy of DB and its read-state snapshot (or of
  DB itself, immutable, with --no-copy), as bench/scale.py serves it: seconds from the
  process start to its first answer at /-/versions.json (Datasette and its plugins loaded,
  the MCP SDK among them: the part that is not the brain's), and to its first answered
  recall (harness.first_recall: the first 200 from POST /DB/-/recall, polled every 20 ms).
  Both again with datasette-mcp's entry point hidden from pluggy: what the MCP SDK it
  imports at startup costs. A snapshot that does not fit the code measured is rewritten
  on the copy first, and said. With --behind N, N more records (SciFact abstracts under
  new ids) are then ingested into the copy, so that each start follows them from a
  snapshot that far behind: a server restarted after a few writes (a snapshot is saved
  again only every SNAPSHOT_EVERY changes).

With --compare ROOT, ROOT's code (another checkout) runs each row too, in the same rounds,
and the figures are given side by side with their ratios. Both checkouts are
byte-compiled first, as pip compiles an installed package. Prints the load average before
and after, a final JSON line, and exits 1 if a goal is missed by this checkout.
"""

import argparse
import compileall
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import first_recall, get, start_server, stop, working_copy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VAULT = ROOT / "docs" / "vault"
SCIFACT = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
CLI = "import sys; from sqlite_utils.cli import cli; sys.argv[0] = 'sqlite-utils'; sys.exit(cli())"
WITHOUT_PLUGIN = "import sqlite_utils.plugins; sqlite_utils.plugins.pm.set_blocked('brain'); " + CLI
# `datasette` with datasette-mcp's entry point hidden from pluggy: what the MCP SDK it imports costs
WITHOUT_DATASETTE_MCP = """
import importlib.metadata, sys
every = importlib.metadata.distributions
importlib.metadata.distributions = lambda **kw: (d for d in every(**kw) if d.metadata["Name"] != "datasette-mcp")
from datasette.cli import cli
sys.argv[0] = "datasette"
sys.exit(cli())
"""
DEMO_QUERY = "who owns the support runbook?"
GOALS = {  # row: (goal, at most)
    "help_share": 0.3,  # `sqlite-utils --help`: the plugin's share
    "brain_help": 1.0,
    "demo_recall": 1.5,
    "first_recall": (1, 3),  # at 50,000 chunks, at 1,000,000 (used from 500,000)
}


def timed(command, env, timeout):
    """(seconds from starting `command` to its exit, the CPU seconds it used); SystemExit
    with its output if it fails."""
    started, cpu = time.perf_counter(), _children_cpu()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr[-1500:]}")
    return seconds, _children_cpu() - cpu


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid):
    """CPU seconds process `pid` has used so far, all its threads (user and system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(brain, env, immutable, query, timeout, python=("-m", "datasette")):
    """{row: (seconds, CPU seconds)} of `datasette serve`: to its first answer at
    /-/versions.json and to its first answered recall, from its start."""
    started = time.perf_counter()
    process, base = start_server(brain, immutable=immutable, env=env, python=python)
    try:
        up = None
        while up is None and time.perf_counter() - started < timeout and process.poll() is None:
            if get(f"{base}/-/versions.json", timeout=timeout)[0] == 200:
                up = time.perf_counter() - started, _process_cpu(process.pid)
            else:
                time.sleep(0.02)
        # the recall is asked once the server is up: it polls the same way from then on,
        # and its figure still counts from the process start
        recall = first_recall(process, f"{base}/{brain.stem}/-/recall", query, started, timeout)
        recall = recall and (recall, _process_cpu(process.pid))
    finally:
        stop(process)
    if up is None or recall is None:
        raise SystemExit(f"datasette serve {brain} answered no recall within {timeout:.0f} s")
    return {"server_up": up, "first_recall": recall}


SNAPSHOT_FITS = """
import sys
from brain_sql import snapshot, state
from brain_sql.connection import open_connection
from brain_sql.follower import last_change
from brain_sql.schema import recorded_model_and_dimension

conn = open_connection(sys.argv[1], read_only=True)
seq, instance, _ = last_change(conn)
try:
    manifest, _ = snapshot.read_manifest(snapshot.path_for(sys.argv[1]))
    held = manifest.get("instance"), manifest.get("seq")
    problem = (
        None if held == (instance, seq) else f"it holds change {held[1]} of {held[0]}, the brain {seq} of {instance}"
    )
except snapshot.SnapshotError as ex:
    problem = str(ex)
if problem and sys.argv[2] == "rewrite":
    state.rewrite_snapshot(conn, recorded_model_and_dimension(conn)[1])
print(problem or "")
"""


def prepare(code, work, args):
    """The environment running `code`, its demo brain, the brain it serves, and whether
    that is served immutable."""
    for package in ("brain_sql", "datasette_brain"):
        compileall.compile_dir(str(Path(code) / package), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(code)}
    work.mkdir(parents=True)
    demo = work / "demo.db"
    timed([sys.executable, "-c", CLI, "brain", "ingest", str(demo), str(VAULT)], env, 600)
    if not args.brain:
        return env, demo, None, []
    if args.copy:
        _, brain, source = working_copy(args.brain, folder=work)
        source.close()
    else:
        brain = Path(args.brain)
    action = "rewrite" if args.copy else "keep"  # the copy's snapshot, written again by `code` if it does not fit
    result = subprocess.run(
        [sys.executable, "-c", SNAPSHOT_FITS, str(brain), action], env=env, capture_output=True, text=True
    )
    if result.returncode:
        raise SystemExit(f"reading the snapshot of {brain} failed:\n{result.stderr[-1500:]}")
    if result.stdout.strip():
        print(
            f"{code}: the snapshot is not the brain's now ({result.stdout.strip()}): "
            + ("written again on the copy" if args.copy else "the server follows the change log, or builds it")
        )
    if args.behind:
        records = work / "behind.jsonl"
        with open(SCIFACT) as corpus, open(records, "w") as out:
            for n, line in zip(range(args.behind), corpus):
                out.write(json.dumps({**json.loads(line), "_id": f"behind-{n}"}) + "\n")
        timed([sys.executable, "-c", CLI, "brain", "ingest", str(brain), str(records)], env, 600)
    return env, demo, brain, not args.copy  # a brain not copied is served immutable: never written


def chunks_in(brain):
    conn = sqlite3.connect(f"file:{Path(brain).resolve()}?mode=ro", uri=True)
    try:
        return conn.execute("select count(*) from knowledge").fetchone()[0]
    finally:
        conn.close()


def one_round(env, demo, brain, immutable, args):
    """{row: (seconds, CPU seconds)} of one run of every row."""
    python = [sys.executable, "-c"]
    figures = {
        "python": timed([*python, "pass"], env, 60),
        "help_without": timed([*python, WITHOUT_PLUGIN, "--help"], env, 60),
        "help": timed([*python, CLI, "--help"], env, 60),
        "version_without": timed([*python, WITHOUT_PLUGIN, "--version"], env, 60),
        "version": timed([*python, CLI, "--version"], env, 60),
        "brain_help": timed([*python, CLI, "brain", "--help"], env, 60),
        "demo_recall": timed([*python, CLI, "brain", "recall", str(demo), DEMO_QUERY], env, 120),
    }
    if brain:
        figures.update(served(brain, env, immutable, args.query, args.timeout))
        without_mcp = served(brain, env, immutable, args.query, args.timeout, python=("-c", WITHOUT_DATASETTE_MCP))
        figures.update({f"{row}_without_mcp": figure for row, figure in without_mcp.items()})
    for command in ("help", "version"):
        with_it, without = figures[command], figures[f"{command}_without"]
        figures[f"{command}_share"] = (with_it[0] - without[0], with_it[1] - without[1])
    return figures


LABELS = {
    "python": "python -c pass",
    "help_without": "sqlite-utils --help, without the plugin",
    "help": "sqlite-utils --help",
    "help_share": "  the plugin's share",
    "version_without": "sqlite-utils --version, without the plugin",
    "version": "sqlite-utils --version",
    "version_share": "  the plugin's share",
    "brain_help": "sqlite-utils brain --help",
    "demo_recall": f'sqlite-utils brain recall demo.db "{DEMO_QUERY}"',
    "server_up": "datasette serve: first answer (/-/versions.json)",
    "first_recall": "datasette serve: first answered recall",
    "server_up_without_mcp": "  first answer, datasette-mcp hidden",
    "first_recall_without_mcp": "  first answered recall, datasette-mcp hidden",
}


def goal_of(row, chunks):
    goal = GOALS.get(row)
    if isinstance(goal, tuple):
        goal = goal[1 if chunks and chunks >= 500_000 else 0]
    return goal


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds; each row's figure is its median")
    parser.add_argument("--brain", help="a brain to serve (with its -brainstate snapshot beside it)")
    parser.add_argument(
        "--copy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve a copy of --brain (default); --no-copy serves it immutable",
    )
    parser.add_argument("--compare", help="another checkout's root, e.g. /work/main, run in the same rounds")
    parser.add_argument(
        "--query", default="Aspirin reduces the risk of heart attacks.", help="the first recall's query"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds the server may take to its first recall")
    parser.add_argument(
        "--behind",
        type=int,
        default=0,
        help="records ingested into the copy after its snapshot, which each start follows",
    )
    args = parser.parse_args()
    if args.behind and not args.copy:
        parser.error("--behind writes to the brain: serve a copy of it (not --no-copy)")
    load_before = os.getloadavg()
    codes = {"this": ROOT, **({"compare": Path(args.compare).resolve()} if args.compare else {})}
    args.brain = args.brain and Path(args.brain).resolve()
    work = Path(tempfile.mkdtemp(prefix="brain-startup-"))
    os.chdir(work)  # `python -c` and `-m` import from the working folder first: never a checkout
    try:
        setups = {name: prepare(code, work / name, args) for name, code in codes.items()}
        chunks = chunks_in(args.brain) if args.brain else None
        rounds = {name: [] for name in codes}
        for n in range(args.runs):
            for name in codes:
                rounds[name].append(one_round(*setups[name], args))
            print(
                f"round {n + 1}/{args.runs}: "
                + ", ".join(
                    f"{name} first recall {rounds[name][-1].get('first_recall', [float('nan')])[0]:.2f} s"
                    for name in codes
                ),
                file=sys.stderr,
                flush=True,
            )
    finally:
        os.chdir(tempfile.gettempdir())
        shutil.rmtree(work, ignore_errors=True)
    medians = {
        name: {row: [statistics.median(r[row][i] for r in rs) for i in (0, 1)] for row in rs[0]}
        for name, rs in rounds.items()
    }
    return report(medians, codes, chunks, args, load_before)


def report(medians, codes, chunks, args, load_before):
    """Print each row's medians, goals and ratios; 0 if this checkout meets every goal."""
    this, compare = medians["this"], medians.get("compare")
    print(
        f"{args.runs} rounds; {os.cpu_count()} cores; this: {codes['this']}"
        + (f"; compare: {codes['compare']}" if compare else "")
        + (
            f"; served: {args.brain} ({chunks:,} chunks{', a copy' if args.copy else ', immutable'})"
            if args.brain
            else ""
        )
    )
    width = max(len(label) for label in LABELS.values())
    print(
        f"{'seconds (CPU seconds)':<{width}}  {'this':>15}"
        + (f"  {'compare':>15}  {'ratio':>6}" if compare else "")
        + "  goal"
    )
    passed = {}
    for row, label in LABELS.items():
        if row not in this:
            continue
        line = f"{label:<{width}}  {this[row][0]:>7.3f} ({this[row][1]:>5.2f})"
        if compare:
            ratio = this[row][0] / compare[row][0] if compare[row][0] > 0 else float("nan")
            line += f"  {compare[row][0]:>7.3f} ({compare[row][1]:>5.2f})  {ratio:>5.2f}x"
        goal = goal_of(row, chunks)
        if goal is not None:
            passed[row] = this[row][0] <= goal
            line += f"  <= {goal:g} s {'pass' if passed[row] else 'FAIL'}"
        print(line)
    before, after = (" ".join(f"{x:.2f}" for x in load) for load in (load_before, os.getloadavg()))
    print(f"load average (1, 5, 15 min): before {before}, after {after}")
    print(
        json.dumps(
            {
                "runs": args.runs,
                "chunks": chunks,
                "medians": medians,
                "passed": passed,
                "load_before": load_before,
                "load_after": os.getloadavg(),
            }
        )
    )
    return 0 if all(passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
