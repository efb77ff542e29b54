"""Compare two evaluation runs query by query.

    python3 bench/compare.py A.jsonl B.jsonl [--modes full,no_graph] [--json]

A and B are files written by `sqlite-utils brain eval DB ... --per-query FILE`
(one JSON line per query). Queries are paired by `query_id` (those in only one
file are counted, not compared). For every mode and metric it prints how many
queries B wins, loses and ties against A, the mean of B - A, and two paired
p-values: the exact two-sided sign test over the queries that differ, and the
paired t-test (two-sided; none when every difference is the same).
"""

import argparse
import json
import math
import sys

from scipy import stats

MODES = ("full", "no_graph", "vector", "fts", "graph")


def load(path):
    """{query_id: line} of a --per-query file."""
    with open(path, encoding="utf-8") as f:
        return {line["query_id"]: line for line in map(json.loads, filter(str.strip, f))}


def sign_test(wins, losses):
    """Exact two-sided sign test: the chance of a split at least this uneven if
    B beats A and A beats B equally often (ties left out)."""
    n = wins + losses
    if not n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_t(deltas):
    """Two-sided p-value of the paired t-test on the differences, or None when it
    is undefined (fewer than two, or all equal)."""
    if len(deltas) < 2 or len(set(deltas)) == 1:
        return None
    mean = sum(deltas) / len(deltas)
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1))
    t = mean / (sd / math.sqrt(len(deltas)))
    return float(2 * stats.t.sf(abs(t), len(deltas) - 1))


def compare(a, b, modes=MODES):
    """{"queries": paired, "only_a": n, "only_b": n, mode: {metric: {"wins", "losses",
    "ties", "mean_a", "mean_b", "mean_delta", "sign_p", "t_p"}}}; wins are B's."""
    paired = sorted(set(a) & set(b))
    result = {"queries": len(paired), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a))}
    for mode in modes:
        names = [name for name in a[paired[0]].get(mode, {})] if paired else []
        result[mode] = {}
        for name in names:
            before = [a[q][mode][name] for q in paired]
            after = [b[q][mode][name] for q in paired]
            deltas = [y - x for x, y in zip(before, after)]
            wins, losses = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
            result[mode][name] = {
                "wins": wins,
                "losses": losses,
                "ties": len(deltas) - wins - losses,
                "mean_a": sum(before) / len(before),
                "mean_b": sum(after) / len(after),
                "mean_delta": sum(deltas) / len(deltas),
                "sign_p": sign_test(wins, losses),
                "t_p": paired_t(deltas),
            }
    return result


def table(result):
    """The comparison as text: one row per mode and metric."""
    rows = [
        f"{result['queries']} queries paired ({result['only_a']} only in A, {result['only_b']} only in B); "
        "wins and losses are B's",
        "",
        f"{'mode':<9} {'metric':<10} {'A':>7} {'B':>7} {'B - A':>8} {'wins':>5} {'losses':>6} {'ties':>5} "
        f"{'sign p':>8} {'t p':>8}",
    ]
    for mode, found in result.items():
        if not isinstance(found, dict):
            continue
        for name, c in found.items():
            t_p = "-" if c["t_p"] is None else f"{c['t_p']:.4f}"
            rows.append(
                f"{mode:<9} {name:<10} {c['mean_a']:>7.4f} {c['mean_b']:>7.4f} {c['mean_delta']:>+8.4f} "
                f"{c['wins']:>5} {c['losses']:>6} {c['ties']:>5} {c['sign_p']:>8.4f} {t_p:>8}"
            )
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the baseline run (--per-query file)")
    parser.add_argument("b", help="the run compared with it")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: all)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    result = compare(load(args.a), load(args.b), [m for m in args.modes.split(",") if m])
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if result["queries"] else 1


if __name__ == "__main__":
    sys.exit(main())
