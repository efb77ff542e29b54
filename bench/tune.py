"""Choose recall's defaults on training data only, as config.py documents them.

    python3 bench/tune.py

1. Leg weights without entity seeds: grid on SciFact qrels/train.tsv (nDCG@10).
2. Leg weights with entity seeds: grid on the MuSiQue + HotpotQA training samples (Recall@5).
   Then the share of a query its named entities' words must hold for the graph to
   lead (config.GRAPH_LEADS_SHARE): grid on SciFact train and both samples.
3. The abstention model: a logistic fit of the quality signals, SciFact training
   queries and conv-26's questions (answerable) against the even-numbered trap
   queries asked of each (not), SciFact and the conversation weighed alike; the
   conversation is asked as it is and with its people called otherwise
   (bench/abstention.py's RENAMED: a question naming a speaker with a rare name
   sits nearer the turns than one naming a common name), the held-out names
   scored apart. The abstention rate of every split at config.ABSTAIN_BELOW.
   `--abstention` runs this step alone.
Prints what it finds; config.py and quality.py hold the chosen values.
"""

import itertools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql import config, quality
from brain_sql.evaluation import load_qrels, load_queries, metrics
from brain_sql.fusion import convex, fuse
from brain_sql.hybrid import read_speakers, run_legs
from brain_sql.querydoc import parse

sys.path.insert(0, str(Path(__file__).parent))
from abstention import RENAMED, conversations, renamed_name  # noqa: E402
from multihop import hotpotqa, musique, write_beir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared/data/scifact"
MULTIHOP = ROOT.parent / "shared/data/multihop-sample/hipporag-legacy-train"


def cached_legs(conn, queries, qrels):
    """(query id, Legs, chunk id -> corpus id) for every judged query."""
    external = dict(conn.execute("select id, external_id from knowledge"))
    model = conn.execute("select value from brain_meta where key = 'model'").fetchone()[0]
    return [(qid, run_legs(conn, parse({"q": queries[qid]}), model), external) for qid in qrels]


def score(cache, qrels, weights_with, weights_without, metric, leads_share=config.GRAPH_LEADS_SHARE):
    """The metric of the fused chunk ranking, collapsed to corpus ids as `brain eval`
    does: RRF with `weights_with` when the graph leads (the query names entities
    whose words hold at least `leads_share` of it), else the convex combination
    with `weights_without`."""
    total = 0.0
    for qid, legs, external in cache:
        if legs.entity_seeds and legs.named_share >= leads_share:
            fused = fuse(legs.ranked, weights_with)
        else:
            fused = convex(legs.ranked, legs.raw, weights_without)
        ranked = list(dict.fromkeys(external[item] for item, _, _ in fused))
        total += metrics(ranked[:10], qrels[qid])[metric]
    return total / len(cache)


def main():
    only_abstention = "--abstention" in sys.argv[1:]
    work = Path(tempfile.mkdtemp(prefix="brain-tune-"))
    scifact = brain_sql.connect(work / "scifact.db")
    brain_sql.ingest(scifact, [SCIFACT / "corpus.jsonl"])
    queries, train = load_queries(SCIFACT / "queries.jsonl"), load_qrels(SCIFACT / "qrels/train.tsv")
    train_cache = cached_legs(scifact, queries, train)

    if not only_abstention:
        grids(work, train, train_cache)
    abstention_model(work, scifact, queries, train_cache)


def grids(work, train, train_cache):
    """Steps 1 and 2: the leg weights and the graph's lead."""
    grid = []
    for vector, graph in itertools.product([0, 0.1, 0.2, 0.3, 0.4, 0.5], [0, 0.1, 0.2, 0.3]):
        weights = {"vector": vector, "fts": round(1.0 - vector, 2), "graph": graph}
        grid.append((score(train_cache, train, config.LEG_WEIGHTS_WITH_ENTITIES, weights, "ndcg@10"), weights))
    print("without entities, SciFact train nDCG@10:", *sorted(grid, key=lambda g: -g[0])[:3], sep="\n  ")

    sets = []
    for name, load in (("musique", musique), ("hotpotqa", hotpotqa)):
        folder = work / name
        folder.mkdir()
        write_beir(folder, *load(MULTIHOP))
        conn = brain_sql.connect(folder / "brain.db")
        brain_sql.ingest(conn, [folder / "corpus.jsonl"])
        qrels = load_qrels(folder / "qrels.tsv")
        sets.append((cached_legs(conn, load_queries(folder / "queries.jsonl"), qrels), qrels))
    grid = []
    for vector, fts, graph in itertools.product([0.1, 0.2, 0.5], [0.25, 0.5, 1.0], [1, 3, 5, 10]):
        weights = {"vector": vector, "fts": fts, "graph": graph}
        recalls = [score(cache, qrels, weights, config.CONVEX_WEIGHTS, "recall@5") for cache, qrels in sets]
        grid.append((sum(recalls), [round(r, 4) for r in recalls], weights))
    print("with entities, (MuSiQue, HotpotQA) Recall@5:", *sorted(grid, key=lambda g: -g[0])[:3], sep="\n  ")
    print("the graph leads from a named share of: SciFact train nDCG@10, (MuSiQue, HotpotQA) Recall@5")
    for share in (0, 0.05, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3):
        with_, without = config.LEG_WEIGHTS_WITH_ENTITIES, config.CONVEX_WEIGHTS
        recalls = [score(cache, qrels, with_, without, "recall@5", share) for cache, qrels in sets]
        scifact_train = score(train_cache, train, with_, without, "ndcg@10", share)
        print(f"  {share:.3f}: {scifact_train:.4f}, ({recalls[0]:.4f}, {recalls[1]:.4f})")


def assessed(conn, text, legs):
    """The quality signals of the legs' fused answer, as recall reads them."""
    fused = legs.fuse()
    read_speakers(conn, parse({"q": text}), legs, fused)
    return quality.assess(conn, legs, fused).signals


def abstention_model(work, scifact, queries, train_cache):
    """Step 3: the answer model, fitted and scored."""
    names = ["coverage", "known", "similarity", "agreement", "speaker"]
    traps = [json.loads(line)["text"] for line in open(ROOT / "tests/data/trap_queries.jsonl")]

    def signals(conn, texts):
        legs = [(text, run_legs(conn, parse({"q": text}), config.DEFAULT_MODEL)) for text in texts]
        return np.array([[assessed(conn, text, leg)[n] for n in names] for text, leg in legs])

    answerable = signals(scifact, [queries[qid] for qid, _, _ in train_cache])
    trap = signals(scifact, traps)
    held = {"SciFact test": signals(scifact, [queries[q] for q in load_qrels(SCIFACT / "qrels/test.tsv")])}
    talk, talk_traps = [], []
    fitted = {"conv-26", *map(renamed_name, RENAMED)}
    for name, folder in conversations(work, ROOT.parent / "shared/data").items():
        conn = brain_sql.connect(work / f"{name}.db")
        brain_sql.ingest(conn, [folder / "corpus.jsonl"])
        asked = signals(conn, list(load_queries(folder / "queries.jsonl").values()))
        trapped = signals(conn, traps)
        if name in fitted:
            talk.append(asked)
            talk_traps.append(trapped[::2])
        held[f"{name} (held out)" if name not in fitted else name] = asked
        held[f"trap of {name}"] = trapped
        conn.close()
    groups = [(answerable, 1), (np.vstack(talk), 1), (trap[::2], 0), (np.vstack(talk_traps), 0)]
    x = np.vstack([g for g, _ in groups])
    y = np.concatenate([np.full(len(g), label) for g, label in groups])
    # each class weighs 1, half of it SciFact's and half the conversation's
    balance = np.concatenate([np.full(len(g), 0.5 / len(g)) for g, _ in groups])
    w, b = np.zeros(len(names)), 0.0
    for _ in range(20000):
        gradient = (1 / (1 + np.exp(-(x @ w + b))) - y) * balance
        w -= 2.0 * (x.T @ gradient + 1e-3 * w)
        b -= 2.0 * gradient.sum()
    print("abstention model:", {n: round(v, 2) for n, v in zip(names, w)}, "bias", round(b, 2))
    for name, values in (
        ("SciFact train", answerable),
        ("trap (fit half)", trap[::2]),
        ("trap (held-out half)", trap[1::2]),
        *held.items(),
    ):
        confidence = 1 / (1 + np.exp(-(values @ w + b)))
        print(f"  abstains below {config.ABSTAIN_BELOW}: {name} {np.mean(confidence < config.ABSTAIN_BELOW):.1%}")


if __name__ == "__main__":
    main()
