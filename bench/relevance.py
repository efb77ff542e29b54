"""Fit each hit's `relevance` on training data only, and write it into brain_sql/config.py.

    python3 bench/relevance.py [--data ../shared/data] [--work DIR] [--write]

Relevance is the probability that a hit is relevant: a logistic model of its
evidence and standing (quality.Evidence.features: the share of the query's terms
it holds, its similarity, its ties to the entities the query names, its fused
rank and share of the first hit's fused score, its share of the best BM25) and
the answer's confidence.

Data (../shared/data beside the repository), never a test split:
- BEIR SciFact, the queries of qrels/train.tsv;
- the MuSiQue and HotpotQA training samples (multihop-sample/hipporag-legacy-train);
- LoCoMo's development conversation (locomo-dev/conv-26, which is there to tune on).
Each corpus is ingested as `brain ingest` does (into --work, kept and reused when
given), each query recalled as the JSON API recalls it (k 10, no cut-off); every
hit of an answer is one example, relevant when the query's judgements name its
record. An abstained query has no hits and adds none: the model describes the
hits recall returns.

Queries are split by a hash of their id: four in five fit the model (each data
set weighed alike, L2 1e-3), one in five is held out. For each data set's held-out
part it prints the Brier score and log loss of the model, of a constant (the fit
part's rate of relevant hits) and of the evidence strength used as a probability,
and for the first hits of its answers the mean relevance against the share that
is relevant (and the lowest: an answer recall gives reads as worth giving).
--write puts the fitted coefficients between the `relevance model` markers of
brain_sql/config.py.
"""

import argparse
import hashlib
import re
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql import config, quality
from brain_sql.evaluation import load_qrels, load_queries

sys.path.insert(0, str(Path(__file__).parent))
from multihop import hotpotqa, musique, write_beir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAMES = list(config.RELEVANCE_MODEL["weights"])
HELD_OUT = 5  # one query in five


def held_out(qid):
    return int(hashlib.sha1(qid.encode()).hexdigest(), 16) % HELD_OUT == 0


def brain(work, name, corpus, model=None):
    """The brain of `corpus` in work/name.db, ingested once (with `model`, else the default)."""
    path = work / f"{name}.db"
    fresh = not path.exists()
    conn = brain_sql.connect(path)
    if fresh:
        brain_sql.ingest(conn, [corpus], **({"model": model} if model else {}))
    return conn


def sets(work, data):
    """(name, connection, queries, qrels) of each training set."""
    scifact = data / "scifact"
    yield (
        "scifact-train",
        brain(work, "scifact", scifact / "corpus.jsonl"),
        load_queries(scifact / "queries.jsonl"),
        load_qrels(scifact / "qrels/train.tsv"),
    )
    for name, load in (("musique-train", musique), ("hotpotqa-train", hotpotqa)):
        folder = work / name
        if not (folder / "corpus.jsonl").exists():
            folder.mkdir(parents=True, exist_ok=True)
            write_beir(folder, *load(data / "multihop-sample/hipporag-legacy-train"))
        yield (
            name,
            brain(work, name, folder / "corpus.jsonl"),
            load_queries(folder / "queries.jsonl"),
            load_qrels(folder / "qrels.tsv"),
        )
    conv = data / "locomo-dev/conv-26"
    yield (
        "locomo-conv-26",
        brain(work, "conv-26", conv / "corpus.jsonl"),
        load_queries(conv / "queries.jsonl"),
        load_qrels(conv / "qrels/test.tsv"),
    )


def examples(conn, queries, qrels):
    """[(query id, features, strength, relevant)] of every hit of every judged query."""
    external = dict(conn.execute("select id, external_id from knowledge"))
    found = []
    for qid in qrels:
        if qid not in queries:
            continue
        result = brain_sql.recall(conn, {"q": queries[qid], "k": 10, "cutoff": False})
        confidence = result["quality"]["confidence"]
        relevant = {doc for doc, grade in qrels[qid].items() if grade > 0}
        for hit in result["hits"]:
            evidence = hit["provenance"]["evidence"]
            features = quality.Evidence(
                evidence["terms"],
                evidence["similarity"],
                evidence["entities"],
                fused_rank=evidence["fused_rank"],
                fused_share=evidence["fused_share"],
                lexical_share=evidence["lexical_share"],
                confidence=confidence,
            ).features()
            found.append((qid, [features[n] for n in NAMES], evidence["strength"], external.get(hit["id"]) in relevant))
    return found


def fit(x, y, weight, l2=1e-3, steps=20000, rate=2.0):
    """Weighted logistic regression by gradient descent: (weights, bias)."""
    w, b = np.zeros(x.shape[1]), 0.0
    weight = weight / weight.sum()
    for _ in range(steps):
        gradient = (1 / (1 + np.exp(-(x @ w + b))) - y) * weight
        w -= rate * (x.T @ gradient + l2 * w)
        b -= rate * gradient.sum()
    return w, b


def scores(p, y):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.mean((p - y) ** 2), -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def write(w, b, figures):
    """Put the coefficients, and the held-out Brier scores, between config.py's markers."""
    path = ROOT / "brain_sql/config.py"
    weights = ", ".join(f'"{n}": {v:.3f}' for n, v in zip(NAMES, w))
    block = f'RELEVANCE_MODEL = {{"bias": {b:.3f}, "weights": {{{weights}}}}}\n'
    said = "; ".join(f"{name} {model:.4f} ({constant:.4f})" for name, model, constant in figures)
    comment = (
        "\n".join(
            textwrap.wrap(
                f"Held-out Brier score (a constant's): {said}.", 116, initial_indent="# ", subsequent_indent="# "
            )
        )
        + "\n"
    )
    text = re.sub(
        r"(# relevance model: begin\n).*?(# relevance model: end\n)",
        lambda m: m.group(1) + comment + _wrapped(block) + m.group(2),
        path.read_text(),
        flags=re.S,
    )
    path.write_text(text)


def _wrapped(block, indent=" " * 19, width=116):
    """`block` cut into lines of at most `width` characters after its commas, later lines after `indent`."""
    out, line = [], ""
    for part in block.rstrip("\n").split(", "):
        piece = part if not line else ", " + part
        if len(line) + len(piece) > width:
            out.append(line + ",")
            line = indent + part
        else:
            line += piece
    return "\n".join(out + [line]) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data"), help="the training data's folder")
    parser.add_argument("--work", help="folder for the brains (kept, and reused when run again)")
    parser.add_argument("--write", action="store_true", help="write the coefficients into brain_sql/config.py")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="brain-relevance-"))
    work.mkdir(parents=True, exist_ok=True)
    data = {}
    for name, conn, queries, qrels in sets(work, Path(args.data)):
        data[name] = examples(conn, queries, qrels)
        print(
            f"{name}: {len(data[name])} hits of {len({e[0] for e in data[name]})} answered queries, "
            f"{np.mean([e[3] for e in data[name]]):.3f} relevant",
            flush=True,
        )
    x, y, weight = [], [], []
    for rows in data.values():
        fitting = [row for row in rows if not held_out(row[0])]
        x += [row[1] for row in fitting]
        y += [float(row[3]) for row in fitting]
        weight += [1.0 / len(fitting)] * len(fitting)  # each data set weighs alike
    x, y, weight = np.array(x), np.array(y), np.array(weight)
    w, b = fit(x, y, weight)
    print("relevance model:", {n: round(float(v), 3) for n, v in zip(NAMES, w)}, "bias", round(float(b), 3))
    print("held out (one query in five): Brier score / log loss of the model, a constant, the evidence strength")
    figures = []
    for name, rows in data.items():
        base = np.mean([row[3] for row in rows if not held_out(row[0])])
        test = [row for row in rows if held_out(row[0])]
        tx, ty = np.array([row[1] for row in test]), np.array([float(row[3]) for row in test])
        model = scores(1 / (1 + np.exp(-(tx @ w + b))), ty)
        constant = scores(np.full(len(ty), base), ty)
        strength = scores(np.array([row[2] for row in test]), ty)
        print(
            f"  {name} ({len(test)} hits, {len({row[0] for row in test})} queries): model {model[0]:.4f} / "
            f"{model[1]:.4f}, constant {constant[0]:.4f} / {constant[1]:.4f}, strength {strength[0]:.4f} / "
            f"{strength[1]:.4f}"
        )
        figures.append((name, model[0], constant[0]))
        # the first hit of each answer: how likely it reads, against how often it is relevant
        first = NAMES.index("inverse_rank")
        firsts = np.array([row[1] for row in test if row[1][first] == 1.0])
        chance = 1 / (1 + np.exp(-(firsts @ w + b)))
        right = np.mean([row[3] for row in test if row[1][first] == 1.0])
        print(
            f"    first hits: relevance {chance.mean():.3f} on average (lowest {chance.min():.3f}), "
            f"relevant {right:.3f}"
        )
    if args.write:
        write(w, b, figures)
        print("written to brain_sql/config.py")


if __name__ == "__main__":
    main()
