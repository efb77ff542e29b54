"""Multi-hop recall on the HippoRAG training samples (MuSiQue, HotpotQA).

    python3 bench/multihop.py [--data ../shared/data/multihop-sample/hipporag-legacy-train]

Each passage is ingested as a title + text record (no hand-made graph: the graph
is what ingest builds, document nodes and title mentions), then `brain eval`
scores Recall@2 and Recall@5 for the full pipeline, without the graph, and per leg.
"""

import argparse
import json
import tempfile
from pathlib import Path

import brain_sql
from brain_sql.evaluation import evaluate

ROOT = Path(__file__).resolve().parent.parent


def musique(data):
    corpus = [(p["title"], p["text"]) for p in json.load(open(data / "musique_train_corpus.json"))]
    questions = [
        (q["id"], q["question"], [(p["title"], p["paragraph_text"]) for p in q["paragraphs"] if p["is_supporting"]])
        for q in json.load(open(data / "musique_train.json"))
    ]
    return corpus, questions


def hotpotqa(data):
    corpus = [
        (title, "".join(sentences)) for title, sentences in json.load(open(data / "hotpotqa_train_corpus.json")).items()
    ]
    questions = []
    for q in json.load(open(data / "hotpotqa_train.json")):
        gold_titles = {title for title, _ in q["supporting_facts"]}
        gold = [(title, "".join(sentences)) for title, sentences in q["context"] if title in gold_titles]
        questions.append((q["_id"], q["question"], gold))
    return corpus, questions


def write_beir(folder, corpus, questions):
    ids = {}
    with open(folder / "corpus.jsonl", "w") as f:
        for i, (title, text) in enumerate(corpus):
            ids.setdefault((title, text), str(i))
            f.write(json.dumps({"_id": str(i), "title": title, "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as f, open(folder / "qrels.tsv", "w") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for qid, question, gold in questions:
            f.write(json.dumps({"_id": qid, "text": question}) + "\n")
            for passage in gold:
                qrels.write(f"{qid}\t{ids[passage]}\t1\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/multihop-sample/hipporag-legacy-train"))
    args = parser.parse_args()
    data = Path(args.data)
    for name, load in (("musique", musique), ("hotpotqa", hotpotqa)):
        folder = Path(tempfile.mkdtemp(prefix=f"brain-{name}-"))
        write_beir(folder, *load(data))
        conn = brain_sql.connect(folder / "brain.db")
        brain_sql.ingest(conn, [folder / "corpus.jsonl"])
        result, extra = evaluate(conn, folder / "queries.jsonl", folder / "qrels.tsv")
        print(
            name,
            json.dumps(
                {
                    mode: {m: result[mode][m] for m in ("recall@2", "recall@5")}
                    for mode in ("full", "no_graph", "graph", "fts", "vector")
                }
            ),
            extra,
        )


if __name__ == "__main__":
    main()
