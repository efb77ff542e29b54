"""Abstention across kinds of corpus: each brain asked each set of questions.

    python3 bench/abstention.py [--data ../shared/data] [--work DIR] [--sample N] [--signals FILE]

Brains (each ingested as `brain ingest` does, into --work, kept and reused when
given): SciFact's corpus (scientific claims' abstracts), LoCoMo's development
conversation (conv-26: one long chat), the MuSiQue and HotpotQA training samples
(Wikipedia passages). Question sets: SciFact's training claims (qrels/train.tsv)
and, held out from any tuning, its test claims; conv-26's questions; MuSiQue's and
HotpotQA's training questions. Each question is recalled as the JSON API recalls it
(k 10) and counts as abstained when the decision is `low_confidence`.

Prints the matrix: one row a brain, one column a question set, the share of
questions abstained. A brain's own questions (and a multi-hop brain asked the
other multi-hop sample's: the same kind of corpus) should rarely abstain; every
other cell is a question from another kind of corpus, which should. --sample N
asks at most N questions of each set (the first N by id hash); --signals FILE
writes one JSON line a (brain, question): its decision and quality signals.
"""

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import brain_sql
from brain_sql.evaluation import load_qrels, load_queries

sys.path.insert(0, str(Path(__file__).parent))
from multihop import hotpotqa, musique, write_beir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KIND = {"scifact": "claims", "conv-26": "conversation", "musique": "wikipedia", "hotpotqa": "wikipedia"}


def corpora(work, data):
    """{brain name: (corpus.jsonl, {question set: {id: text}})}, the multi-hop samples
    written in BEIR's layout under work."""
    scifact, conv = data / "scifact", data / "locomo-dev/conv-26"
    claims = load_queries(scifact / "queries.jsonl")
    found = {
        "scifact": (
            scifact / "corpus.jsonl",
            {
                f"scifact-{split}": {q: claims[q] for q in load_qrels(scifact / f"qrels/{split}.tsv") if q in claims}
                for split in ("train", "test")
            },
        ),
        "conv-26": (conv / "corpus.jsonl", {"conv-26": load_queries(conv / "queries.jsonl")}),
    }
    for name, load in (("musique", musique), ("hotpotqa", hotpotqa)):
        folder = work / name
        if not (folder / "corpus.jsonl").exists():
            folder.mkdir(parents=True, exist_ok=True)
            write_beir(folder, *load(data / "multihop-sample/hipporag-legacy-train"))
        found[name] = (folder / "corpus.jsonl", {name: load_queries(folder / "queries.jsonl")})
    return found


def brain(work, name, corpus):
    """The brain of `corpus` in work/name.db, ingested once."""
    path = work / f"{name}.db"
    fresh = not path.exists()
    conn = brain_sql.connect(path)
    if fresh:
        brain_sql.ingest(conn, [corpus])
    return conn


def sample(questions, n):
    """At most n of {id: text}, chosen by a hash of the id (the same every run)."""
    ranked = sorted(questions, key=lambda q: hashlib.sha1(q.encode()).hexdigest())
    return {q: questions[q] for q in ranked[:n]} if n else questions


def own(brain_name, question_set):
    """Whether the questions come from the same kind of corpus as the brain."""
    return KIND[brain_name] == KIND[question_set.split("-")[0] if question_set.startswith("scifact") else question_set]


def matrix(work, data, n=0, signals=None):
    """{(brain, question set): share abstained}."""
    found = corpora(work, data)
    sets = {name: sample(q, n) for _, (_, qs) in found.items() for name, q in qs.items()}
    shares = {}
    for name, (corpus, _) in found.items():
        conn = brain(work, name, corpus)
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data"))
    parser.add_argument("--work", help="a folder for the brains, kept and reused (default: a fresh temporary one)")
    parser.add_argument("--sample", type=int, default=0, help="at most this many questions of each set")
    parser.add_argument("--signals", help="write each (brain, question)'s decision and signals here, a JSON line each")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="brain-abstention-"))
    work.mkdir(parents=True, exist_ok=True)
    out = open(args.signals, "w") if args.signals else None
    shares, sizes = matrix(work, Path(args.data), args.sample, out)
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
