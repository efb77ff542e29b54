"""The vector leg's first pass over sign codes against the exact scan, in-process,
on an existing brain opened read-only (docs/scale.md, "The vector leg"):

    python3 bench/vectors.py --brain /work/scale/b1m/brain.db [--queries 200] [--recalls 100] [--seconds 15]

The read state is loaded from the brain's snapshot (or built from SQL when it has
none that fits; nothing is written beside the brain), and its sign codes made when
the snapshot holds none. Queries are SciFact claims. In one run, each way taken in
turn query by query ("codes": $BRAIN_VECTOR_CODES on, "exact": off):

- the vector leg alone (ChunkIndex.nearest, 100 nearest) with every chunk visible,
  with half of them and with a tenth (a filter on observed_at hiding the rest):
  p50 each way, and recall@10 and recall@100 of the codes' answer against the
  exact scan's;
- whole recall (brain_sql.recall, k = 10) with every chunk visible and with the
  tenth: p50 each way, and the share of its ten hits the codes leave unchanged;
- recalls a second from two threads at once, each way for --seconds in five
  windows taken in turn with the other way's.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql import querydoc, state
from brain_sql.embed import embed
from brain_sql.filters import Filters
from brain_sql.schema import recorded_model_and_dimension
from brain_sql.vectors import quantize_int8

ROOT = Path(__file__).resolve().parent.parent
QUERIES = next(
    (p / "shared/data/scifact/queries.jsonl" for p in ROOT.parents if (p / "shared/data/scifact").exists()), None
)
WAYS = {"codes": "on", "exact": "off"}


def way(name):
    os.environ["BRAIN_VECTOR_CODES"] = WAYS[name]


def interleaved(function, items):
    """{way: ([result], [ms])} of function(item) for each item, both ways per item,
    which goes first alternating (the second call of a query finds caches warm)."""
    found = {name: ([], []) for name in WAYS}
    for at, item in enumerate(items):
        for name in list(WAYS)[:: 1 if at % 2 else -1]:
            way(name)
            started = time.perf_counter()
            result = function(item)
            found[name][1].append((time.perf_counter() - started) * 1000)
            found[name][0].append(result)
    return found


def overlap(found, truth, k):
    """The mean share of each exact top k that `found` also has in its top k (an
    answer without hits, both ways, counts as the same)."""
    return statistics.mean(
        len({i for i, *_ in f[:k]} & {i for i, *_ in t[:k]}) / min(k, len(t)) if t else float(not f)
        for f, t in zip(found, truth)
    )


def since_hiding(chunks, share):
    """A `since` (observed at or after) that hides about `share` of the live chunks."""
    observed = chunks.rows.observed_at[chunks.rows.live]
    moment = int(np.quantile(observed, share))
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def throughput(path, texts, seconds, threads=2, rounds=5):
    """{way: recalls a second} from `threads` threads at once, each with its own
    connection, the ways taken in turn for `rounds` windows each (so both see the
    same load on a shared machine)."""
    counts = {name: [0, 0.0] for name in WAYS}
    conns = [brain_sql.connect(path, read_only=True) for _ in range(threads)]
    for round_ in range(rounds):
        for name in list(WAYS)[:: 1 if round_ % 2 else -1]:
            way(name)
            done = []
            stop = time.perf_counter() + seconds / rounds

            def client(n, round_=round_, done=done, stop=stop):
                count, i = 0, n + round_ * 1000
                while time.perf_counter() < stop:
                    brain_sql.recall(conns[n], {"q": texts[i % len(texts)], "k": 10})
                    count, i = count + 1, i + threads
                done.append(count)

            started = time.perf_counter()
            running = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
            for thread in running:
                thread.start()
            for thread in running:
                thread.join()
            counts[name][0] += sum(done)
            counts[name][1] += time.perf_counter() - started
    return {name: count / elapsed for name, (count, elapsed) in counts.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brain", required=True)
    parser.add_argument("--queries", type=int, default=200, help="vector leg queries")
    parser.add_argument("--recalls", type=int, default=100, help="whole recalls timed each way")
    parser.add_argument("--seconds", type=float, default=15.0, help="each way's two-thread run, in five windows")
    parser.add_argument("--query-file", default=str(QUERIES))
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    state._worth_saving = lambda held: False  # never write a snapshot beside a brain this only reads
    conn = brain_sql.connect(args.brain, read_only=True)
    model, dimension = recorded_model_and_dimension(conn)
    texts = [json.loads(line)["text"] for line in open(args.query_file)]
    queries = [v.tobytes() for v in quantize_int8(embed(texts[: args.queries], model))]
    print(f"load average {os.getloadavg()[0]:.1f}")
    way("codes")
    started = time.perf_counter()
    read = state.current(conn, dimension)
    chunks = read.chunks
    print(f"state: {chunks.count} chunks, ready in {time.perf_counter() - started:.1f} s (sign codes included)")
    started = time.perf_counter()
    chunks.signs = None
    chunks.make_codes()
    print(f"sign codes made from the vectors in {time.perf_counter() - started:.2f} s")

    hidden = {"all": None, "half": since_hiding(chunks, 0.5), "tenth": since_hiding(chunks, 0.9)}
    masks = {}
    for name, since in hidden.items():
        filters = Filters.from_querydoc(querydoc.parse({"q": "x", **({"since": since} if since else {})}))
        with read.lock:
            masks[name] = chunks.visible(filters)
    brain_sql.recall(conn, {"q": texts[0]})
    for name, mask in masks.items():
        with read.lock:
            found = interleaved(lambda q, mask=mask: chunks.nearest(q, mask, 100), queries)
        (codes, codes_ms), (exact, exact_ms) = found["codes"], found["exact"]
        print(
            f"vector leg, {int(mask.sum())} visible ({name}): codes p50 {statistics.median(codes_ms):.2f} ms, "
            f"exact p50 {statistics.median(exact_ms):.2f} ms "
            f"({statistics.median(exact_ms) / statistics.median(codes_ms):.1f}x); "
            f"recall@10 {overlap(codes, exact, 10):.4f}, recall@100 {overlap(codes, exact, 100):.4f}"
        )
    for name in ("all", "tenth"):
        since = {"since": hidden[name]} if hidden[name] else {}
        found = interleaved(
            lambda t, since=since: [h["id"] for h in brain_sql.recall(conn, {"q": t, "k": 10, **since})["hits"]],
            texts[: args.recalls],
        )
        (codes, codes_ms), (exact, exact_ms) = found["codes"], found["exact"]
        same = overlap([[(i,) for i in c] for c in codes], [[(i,) for i in e] for e in exact], 10)
        print(
            f"whole recall ({name}): codes p50 {statistics.median(codes_ms):.1f} ms, "
            f"exact p50 {statistics.median(exact_ms):.1f} ms "
            f"({statistics.median(exact_ms) / statistics.median(codes_ms):.2f}x); "
            f"{same:.4f} of the ten hits the same"
        )
    rates = throughput(args.brain, texts[args.recalls :], args.seconds)
    print(
        f"two threads: codes {rates['codes']:.1f} recalls/s, exact {rates['exact']:.1f} recalls/s "
        f"({rates['codes'] / rates['exact']:.2f}x)"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
