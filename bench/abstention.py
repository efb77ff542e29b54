"""Abstention across kinds of corpus: each brain asked each set of questions.

    python3 bench/abstention.py [--data ../shared/data] [--work DIR] [--model M] [--sample N] [--signals FILE]
        [--ask-renamed A/B,...] [--fit]

Brains (each ingested as `brain ingest` does, into --work, kept and reused when
given): SciFact's corpus (scientific claims' abstracts), LoCoMo's development
conversation (conv-26: one long chat) and eight copies of it with its people
renamed (RENAMED, RENAMED_HELD_OUT; each a brain and a question set), the MuSiQue
and HotpotQA training samples (Wikipedia passages); with --model M, each made with that embedding model (give a
--work of its own). Question sets: SciFact's training claims (qrels/train.tsv)
and, held out from any tuning, its test claims; conv-26's questions; MuSiQue's and
HotpotQA's training questions. Each question is recalled as the JSON API recalls it
(k 10) and counts as abstained when the decision is `low_confidence`.

Prints the matrix: one row a brain, one column a question set, the share of
questions abstained. A brain's own questions (and a multi-hop brain asked the
other multi-hop sample's: the same kind of corpus) should rarely abstain; every
other cell is a question from another kind of corpus, which should. --sample N
asks at most N questions of each set (the first N by id hash); --signals FILE
writes one JSON line a (brain, question): its decision and quality signals;
--ask-renamed John/Maria,James/Sam also asks every brain conv-26's questions
with its people so called (question sets only, in no fit).

--fit fits brain_sql/quality.py's belonging model instead. Every question is
recalled with the belonging model off (as `brain eval` ranks: k 30, no cut-off),
keeping its signals, the answer model's confidence and, for a brain's own judged
questions, the metric reported for that corpus (SciFact nDCG@10, conv-26
Recall@10, the multi-hop samples' Recall@5). The model is a logistic regression
of own (1) against another kind's (0) questions, each (brain, question set) cell
weighed alike, over the pairs it is asked of (the top hit missing a searched
word); SciFact's test claims are held out of it. Its bias is then raised by the
largest shift (a quarter at a time) at which the training questions still keep
the goals (every cross pair abstaining on at least 95%, a brain's own questions
on at most 3%), so that as few of a brain's own questions as the goals allow are
lost. It prints the weights and bias, a leave-one-corpus-out check (fitted
without one corpus's brain and questions, scored on that brain and those
questions, the same shift applied) and, for a range of shifts of the bias, the
matrix it would give and what the brains' own questions would lose (* the shift
chosen).
"""

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql import quality
from brain_sql.config import ABSTAIN_BELOW
from brain_sql.evaluation import load_qrels, load_queries, metrics

sys.path.insert(0, str(Path(__file__).parent))
from locomo import renamed  # noqa: E402
from multihop import hotpotqa, musique, write_beir  # noqa: E402
from relevance import brain  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KIND = {"scifact": "claims", "conv-26": "conversation", "musique": "wikipedia", "hotpotqa": "wikipedia"}
# conv-26 with its people called otherwise ("conv-26~Emma": bench/locomo.py's renamed): the
# two speakers' names are rare words in conv-26 ("Melanie") and weigh on every vector that
# holds them, so its questions sit nearer their turns than a conversation between people
# with common names does; its own questions and these are fitted on alike. Common first
# names, none LoCoMo's; the second four are held out of every fit, as SciFact's test claims.
RENAMED = [
    {"Caroline": "Emma", "Caro": "Em", "Melanie": "Olivia", "Mel": "Liv"},
    {"Caroline": "Anna", "Caro": "Annie", "Melanie": "Tom", "Mel": "Tommy"},
    {"Caroline": "Kate", "Caro": "Katie", "Melanie": "Ben", "Mel": "Benny"},
    {"Caroline": "Rosa", "Caro": "Ro", "Melanie": "Pedro", "Mel": "Pete"},
]
RENAMED_HELD_OUT = [
    {"Caroline": "Sophia", "Caro": "Soph", "Melanie": "Ethan", "Mel": "Eth"},
    {"Caroline": "Lily", "Caro": "Lil", "Melanie": "Max", "Mel": "Maxi"},
    {"Caroline": "Priya", "Caro": "Pri", "Melanie": "Wei", "Mel": "Weiwei"},
    {"Caroline": "Sara", "Caro": "Sari", "Melanie": "David", "Mel": "Dave"},
]


def renamed_name(names):
    """The brain and question set of conv-26 with `names`: 'conv-26~Emma'."""
    return "conv-26~" + names["Caroline"]


def kind(name):
    """The kind of corpus of a brain or question set (a renamed conversation's: conversation)."""
    return KIND[base(name)]


def conversations(work, data):
    """{name: folder} of conv-26 and of each renamed copy of it (written under work)."""
    conv = data / "locomo-dev/conv-26"
    copies = {renamed_name(names): renamed(conv, names, work / "renamed") for names in RENAMED + RENAMED_HELD_OUT}
    return {"conv-26": conv, **copies}


def corpora(work, data):
    """{brain name: (corpus.jsonl, {question set: {id: text}})}, the multi-hop samples
    written in BEIR's layout under work."""
    scifact = data / "scifact"
    claims = load_queries(scifact / "queries.jsonl")
    found = {
        "scifact": (
            scifact / "corpus.jsonl",
            {
                f"scifact-{split}": {q: claims[q] for q in load_qrels(scifact / f"qrels/{split}.tsv") if q in claims}
                for split in ("train", "test")
            },
        ),
    }
    for name, folder in conversations(work, data).items():
        found[name] = (folder / "corpus.jsonl", {name: load_queries(folder / "queries.jsonl")})
    for name, load in (("musique", musique), ("hotpotqa", hotpotqa)):
        folder = work / name
        if not (folder / "corpus.jsonl").exists():
            folder.mkdir(parents=True, exist_ok=True)
            write_beir(folder, *load(data / "multihop-sample/hipporag-legacy-train"))
        found[name] = (folder / "corpus.jsonl", {name: load_queries(folder / "queries.jsonl")})
    return found


def sample(questions, n):
    """At most n of {id: text}, chosen by a hash of the id (the same every run)."""
    ranked = sorted(questions, key=lambda q: hashlib.sha1(q.encode()).hexdigest())
    return {q: questions[q] for q in ranked[:n]} if n else questions


def base(name):
    """The corpus a brain or question set was made from ('conv-26~Emma': conv-26)."""
    return corpus_of(name).split("~")[0]


def corpus_of(question_set):
    """The corpus a question set was asked of (SciFact's two splits: scifact)."""
    return "scifact" if question_set.startswith("scifact") else question_set


def own(brain_name, question_set):
    """Whether the questions come from the same kind of corpus as the brain."""
    return kind(brain_name) == kind(question_set)


def asked_renamed(work, data, pairs):
    """{question set: {id: text}} of conv-26's questions with its two people called
    each pair of names ("John/Maria": Caroline John, Melanie Maria), asked of every
    brain and made into none."""
    conv, sets = data / "locomo-dev/conv-26", {}
    for pair in pairs:
        first, second = pair.split("/")
        names = {"Caroline": first, "Caro": first, "Melanie": second, "Mel": second}
        sets[renamed_name(names)] = load_queries(renamed(conv, names, work / "renamed") / "queries.jsonl")
    return sets


def matrix(work, data, n=0, signals=None, model=None, ask=()):
    """{(brain, question set): share abstained}; `ask`: pairs of names asked_renamed asks too."""
    found = corpora(work, data)
    sets = {name: sample(q, n) for _, (_, qs) in found.items() for name, q in qs.items()}
    sets |= {name: sample(q, n) for name, q in asked_renamed(work, data, ask).items()}
    shares = {}
    for name, (corpus, _) in found.items():
        conn = brain(work, name, corpus, model)
        for set_name, questions in sets.items():
            abstained = 0
            for qid, text in questions.items():
                result = brain_sql.recall(conn, {"q": text, "k": 10})
                abstained += result["decision"] == "low_confidence"
                if signals:
                    line = {"brain": name, "set": set_name, "id": qid, "decision": result["decision"]}
                    signals.write(json.dumps({**line, **result["quality"]}) + "\n")
            shares[name, set_name] = abstained / max(len(questions), 1)
        conn.close()
    return shares, {name: len(q) for name, q in sets.items()}


# the metric reported for each corpus's own questions (docs/evaluation.md)
METRIC = {"scifact-train": "ndcg@10", "scifact-test": "ndcg@10", "conv-26": "recall@10", "musique": "recall@5"}
METRIC["hotpotqa"] = "recall@5"
FEATURES = ("coverage", "similarity", "affinity", "named", "speaker", "rarity", "stranger")
HELD_OUT = {"scifact-test", *map(renamed_name, RENAMED_HELD_OUT)}  # as brains and as question sets
SHIFTS = [x / 4 for x in range(-8, 5)]
# the goals a shift of the bias must keep on the training questions: every cross
# pair abstaining on at least this share, every brain's own questions on at most this
CROSS_AT_LEAST, OWN_AT_MOST = 0.95, 0.03


def judgements(work, data):
    """{question set: its qrels}, for the brains' own question sets."""
    folders = {name: folder / "qrels/test.tsv" for name, folder in conversations(work, data).items()}
    folders |= {f"scifact-{split}": data / f"scifact/qrels/{split}.tsv" for split in ("train", "test")}
    folders |= {name: work / name / "qrels.tsv" for name in ("musique", "hotpotqa")}
    return {name: load_qrels(path) for name, path in folders.items()}


def gather(work, data, n=0, model=None):
    """One row a (brain, question), recalled with the belonging model off: its
    signals, the answer model's confidence and, for a brain's own judged
    question, the corpus's metric."""
    found, qrels = corpora(work, data), judgements(work, data)
    sets = {name: sample(q, n) for _, (_, qs) in found.items() for name, q in qs.items()}
    rows, saved = [], quality.belonging_model
    quality.belonging_model = lambda model_id: (saved(model_id)[0], math.inf)  # the probability is 1: never the lower
    try:
        for name, (corpus, _) in found.items():
            conn = brain(work, name, corpus, model)
            for set_name, questions in sets.items():
                for qid, text in questions.items():
                    result = brain_sql.recall(conn, {"q": text, "k": 30, "cutoff": False})
                    row = {"brain": name, "set": set_name, "id": qid, **result["quality"]}
                    if name == corpus_of(set_name) and qid in qrels.get(set_name, {}):
                        ranked = list(dict.fromkeys(h["external_id"] for h in result["hits"]))[:10]
                        row["metric"] = metrics(ranked, qrels[set_name][qid])[METRIC[set_name.split("~")[0]]]
                    rows.append(row)
            conn.close()
    finally:
        quality.belonging_model = saved
    return rows


def labelled(row):
    """1 for a brain's own question, 0 for another kind's, None for neither (a
    multi-hop brain asked the other sample's: the same kind, other passages)."""
    if row["brain"] == row["set"] or (row["brain"] == "scifact" and row["set"].startswith("scifact")):
        return 1
    return None if own(row["brain"], row["set"]) else 0


def fit(rows, l2=1e-3):
    """(weights, bias) of the logistic regression of labelled(row) on FEATURES over
    the rows the belonging model is asked of, each (brain, set) cell weighed alike (a
    corpus's renamed copies sharing its weight): Newton's method on standardised signals."""
    rows, y, weight = _fitted(rows)
    x = np.array([[r["signals"][f] for f in FEATURES] for r in rows])
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = l2 * np.diag([1.0] * len(FEATURES) + [0.0])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-z @ beta))
        gradient = z.T @ (weight * (p - y)) + penalty @ beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + penalty
        beta -= np.linalg.solve(hessian, gradient)
    weights = beta[:-1] / scale
    return dict(zip(FEATURES, weights.round(2).tolist())), round(float(beta[-1] - weights @ mean), 2)


def _fitted(rows):
    """(the rows the belonging model is asked of and labelled, their labels, their
    weights): each (brain, set) cell weighed alike, a corpus's renamed copies
    sharing its weight."""
    rows = [r for r in rows if labelled(r) is not None and r["signals"]["coverage"] < 1.0]
    cells, copies = {}, {}
    for r in rows:
        cells[r["brain"], r["set"]] = cells.get((r["brain"], r["set"]), 0) + 1
    for brain_name in {r["brain"] for r in rows}:
        copies[base(brain_name)] = copies.get(base(brain_name), 0) + 1
    weight = np.array(
        [1.0 / (cells[r["brain"], r["set"]] * copies[base(r["brain"])] * copies[base(r["set"])]) for r in rows]
    )
    return rows, np.array([labelled(r) for r in rows], float), weight / weight.sum()


def abstains(row, weights, bias):
    """Whether the row's question abstains with this belonging model (every brain
    here reaches more than RECALL_CANDIDATES rows, so it is asked whenever the top
    hit misses a searched word)."""
    confidence = row["confidence"]
    if row["signals"]["coverage"] < 1.0:
        logit = bias + sum(w * row["signals"][f] for f, w in weights.items())
        confidence = min(confidence, 1.0 / (1.0 + math.exp(-logit)))
    return confidence < ABSTAIN_BELOW


def shares(rows, weights, bias):
    """{(brain, set): share abstained}, {set: (metric with abstentions scoring 0,
    metric of the answer model alone, questions newly abstained)}."""
    cells, scores = {}, {}
    for r in rows:
        gone = abstains(r, weights, bias)
        cells.setdefault((r["brain"], r["set"]), []).append(gone)
        if "metric" in r and r["brain"] == corpus_of(r["set"]):
            before = r["metric"] if r["confidence"] >= ABSTAIN_BELOW else 0.0
            scores.setdefault(r["set"], []).append((0.0 if gone else before, before, gone and before > 0))
    summary = {
        s: (np.mean([a for a, _, _ in v]), np.mean([b for _, b, _ in v]), sum(c for *_, c in v))
        for s, v in scores.items()
    }
    return {cell: float(np.mean(v)) for cell, v in cells.items()}, summary


def extremes(cells, rows):
    """(the lowest share of a cross pair, the highest of a brain's own questions)."""
    label = {(r["brain"], r["set"]): labelled(r) for r in rows}
    cross = [v for c, v in cells.items() if label[c] == 0]
    owned = [v for c, v in cells.items() if label[c] == 1]
    return min(cross, default=1.0), max(owned, default=0.0)


def chosen_shift(training, weights, bias, shifts):
    """The largest of `shifts` at which the training questions keep the goals
    (CROSS_AT_LEAST, OWN_AT_MOST): the fewest of a brain's own questions lost
    while another kind's still abstain; 0 (the fit itself) when none does."""
    kept = [s for s in shifts if _keeps(extremes(shares(training, weights, bias + s)[0], training))]
    return max(kept, default=0.0)


def _keeps(extreme):
    low, high = extreme
    return low >= CROSS_AT_LEAST and high <= OWN_AT_MOST


def report_fit(rows, shifts, model=None):
    """Print the fitted model, the leave-one-corpus-out check and the shift table."""
    training = [r for r in rows if r["set"] not in HELD_OUT and r["brain"] not in HELD_OUT]
    weights, bias = fit(training)
    # what quality.py ships: the model fitted before `speaker` and `stranger`, each of
    # which came later with the weight the whole fit gave it then (they set apart only
    # questions naming people)
    shipped, shipped_bias = quality.belonging_model(model)
    unweighed = {f: weights[f] for f in FEATURES if f not in shipped}
    if unweighed:
        print(f"signals this model does not weigh, with the whole fit's weights: {unweighed}")
    cells, scores = shares(rows, shipped, shipped_bias)
    low, high = extremes(cells, rows)
    print(f"weights {shipped}, bias {shipped_bias}  # quality.py's for this model")
    print(f"  lowest cross {100 * low:.1f}%, highest own {100 * high:.1f}% (held-out cells included)")
    for cell in sorted(cells):
        label = labelled({"brain": cell[0], "set": cell[1]})
        if label == 1 or (label == 0 and cells[cell] < CROSS_AT_LEAST):
            print(f"    {cell[0]} x {cell[1]}: {100 * cells[cell]:.1f}")
    print("  own metrics: " + " ".join(f"{s} {scores[s][0]:.4f} ({scores[s][1]:.4f})" for s in scores))
    print("\nthe whole model fitted again:")
    shift = chosen_shift(training, weights, bias, shifts)
    print(f"BELONGING_WEIGHTS = {weights}\nBELONGING_BIAS = {round(bias + shift, 2)}  # the fit's {bias}, {shift:+.2f}")
    print(f"\nleave one corpus out (fitted without its brain and its questions, scored on them, {shift:+.2f}):")
    for corpus in ("scifact", "conv-26", "musique", "hotpotqa"):
        away = [r for r in training if corpus not in (base(r["brain"]), base(r["set"]))]
        held = [r for r in rows if corpus in (base(r["brain"]), base(r["set"]))]
        w, b = fit(away)
        cells, _ = shares(held, w, b + shift)
        low, high = extremes(cells, held)
        worst = min((c for c in cells if labelled({"brain": c[0], "set": c[1]}) == 0), key=cells.get)
        print(f"  {corpus:>9}: cross >= {100 * low:.1f}% ({' x '.join(worst)}), own <= {100 * high:.1f}%  ({w}, {b})")
    print("\nshift of the bias -> lowest cross %, highest own %, own questions newly abstained, own metrics:")
    for other in shifts:
        cells, scores = shares(rows, weights, bias + other)
        low, high = extremes(cells, rows)
        lost = " ".join(f"{s} {scores[s][2]}" for s in scores)
        metric = " ".join(f"{s} {scores[s][0]:.4f} ({scores[s][1]:.4f})" for s in scores)
        mark = "*" if other == shift else " "
        print(f" {mark}{other:+.2f} ({bias + other:.2f}): {100 * low:.1f} {100 * high:.1f} | {lost} | {metric}")
        for cell in sorted(cells):
            if labelled({"brain": cell[0], "set": cell[1]}) == 0 and cells[cell] < CROSS_AT_LEAST:
                print(f"      {cell[0]} x {cell[1]}: {100 * cells[cell]:.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data"))
    parser.add_argument("--work", help="a folder for the brains, kept and reused (default: a fresh temporary one)")
    parser.add_argument("--model", help="the embedding model the brains are made with (default: the default model)")
    parser.add_argument("--sample", type=int, default=0, help="at most this many questions of each set")
    parser.add_argument("--signals", help="write each (brain, question)'s decision and signals here, a JSON line each")
    parser.add_argument(
        "--fit",
        nargs="?",
        const=True,
        metavar="SIGNALS",
        help="fit the belonging model and print what it gives (from a file --fit --signals wrote, when given)",
    )
    parser.add_argument(
        "--ask-renamed",
        default="",
        metavar="A/B,...",
        help="also ask every brain conv-26's questions with its people called A and B (a question set each)",
    )
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="brain-abstention-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.fit:
        if isinstance(args.fit, str):
            return report_fit([json.loads(line) for line in open(args.fit)], SHIFTS, args.model)
        rows = gather(work, Path(args.data), args.sample, args.model)
        if args.signals:
            with open(args.signals, "w") as out:
                out.writelines(json.dumps(r) + "\n" for r in rows)
        return report_fit(rows, SHIFTS, args.model)
    out = open(args.signals, "w") if args.signals else None
    ask = [pair for pair in args.ask_renamed.split(",") if pair]
    taken = {names["Caroline"].casefold() for names in RENAMED + RENAMED_HELD_OUT} | {"caroline"}
    for pair in ask:
        name = r"[A-Z][a-z]*(?:['\u2019-]?[A-Z][a-z]+)*"  # "Tom", "Mary-Jane", "O'Brien", "McKenzie"
        if not re.fullmatch(rf"{name}/{name}", pair) or min(map(len, pair.split("/"))) < 2:
            parser.error(f"--ask-renamed takes pairs of names as A/B (Tom/Anna, Mary-Jane/O'Brien), not {pair!r}")
        first = pair.split("/")[0]
        if first.casefold() in taken:  # conv-26's own Caroline too
            parser.error(f"--ask-renamed {pair}: {first} already names a question set; choose another")
        taken.add(first.casefold())
    shares, sizes = matrix(work, Path(args.data), args.sample, out, args.model, ask)
    if out:
        out.close()
    columns = list(sizes)
    print("abstained (%), rows: brains, columns: question sets; * a brain's own kind of question")
    print(f"{'':>10}" + "".join(f"{c + ' (' + str(sizes[c]) + ')':>22}" for c in columns))
    for name in dict.fromkeys(b for b, _ in shares):
        cells = [f"{100 * shares[name, c]:.1f}{'*' if own(name, c) else ' '}" for c in columns]
        print(f"{name:>10}" + "".join(f"{cell:>22}" for cell in cells))
    print(json.dumps({f"{b} x {c}": round(100 * v, 1) for (b, c), v in shares.items()}))


if __name__ == "__main__":
    main()
