"""BEIR-format evaluation of recall: nDCG@10, Recall@2/5/10 and MRR@10 for the
full pipeline, the pipeline without the graph, and each leg alone. Rankings are
measured without the relevance cut-off (`cutoff: false`), so figures stay
comparable whatever it is set to.

Corpus ids are the records' own `_id` (knowledge.external_id); a record split
into several chunks ranks where its best chunk ranks, once.

With `per_query`, each query's metrics per mode are also written as JSON lines,
so two runs can be compared query by query (bench/compare.py): one line a query,
{"query_id", "text", "judged": relevant ids, "abstained": whether the full
pipeline abstained, "<mode>": {metric: value} for each mode, "ranked": {mode:
corpus ids in rank order, at most k}}.
"""

import contextlib
import csv
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

from .config import MAX_JSON_FILE_BYTES
from .connection import Connection
from .errors import InputError, QueryError
from .hybrid import finish, run_legs
from .querydoc import parse
from .schema import recorded_model

MODES = ("full", "no_graph", "vector", "fts", "graph")


def load_queries(path):
    """{query id: text} of a BEIR queries.jsonl; an InputError names the file and
    line of anything else."""
    queries = {}
    for number, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            query = json.loads(line)
        except ValueError as ex:
            raise InputError(f"{path}:{number}: not a JSON object ({ex})") from ex
        if not isinstance(query, dict) or query.get("_id") is None or not isinstance(query.get("text"), str):
            raise InputError(f'{path}:{number}: a query needs "_id" and "text"')
        if str(query["_id"]) in queries:
            raise InputError(f"{path}:{number}: query id {query['_id']!r} again")
        queries[str(query["_id"])] = query["text"]
    return queries


def load_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """{query id: {corpus id: grade}} of a BEIR qrels .tsv (a header and blank
    lines are passed over); any other line that is not a query id, a corpus id and
    a whole-number grade, tab-separated, is an InputError naming it."""
    qrels: dict[str, dict[str, int]] = {}
    for line, row in enumerate(csv.reader(_text(path).splitlines(), delimiter="\t"), 1):
        if not any(cell.strip() for cell in row):
            continue
        grade = row[2].strip().removeprefix("-") if len(row) >= 3 else ""
        if not (grade.isascii() and grade.isdigit()):
            if line == 1:
                continue  # the header
            found = f"score {row[2]!r:.40}" if len(row) >= 3 else f"{len(row)} tab-separated column(s)"
            raise InputError(
                f"{path}:{line}: {found}; a qrels line is a query id, a corpus id and a whole-number score, "
                "tab-separated"
            )
        qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def _text(path):
    """A file's text; an InputError names it when it cannot be read, is not UTF-8, or is
    longer than MAX_JSON_FILE_BYTES (/dev/zero was read until the system ran out of memory)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JSON_FILE_BYTES + 1)
        if len(data) > MAX_JSON_FILE_BYTES:
            raise InputError(f"{path} is longer than {MAX_JSON_FILE_BYTES:,} bytes: give a queries or qrels file")
        return data.decode("utf-8")
    except UnicodeDecodeError as ex:
        raise InputError(f"{path}: not UTF-8 text ({ex.reason} at byte {ex.start})") from ex
    except OSError as ex:
        raise InputError(f"{path} cannot be read: {ex.strerror or ex}") from ex


def metrics(ranked, relevant):
    """The five metrics for one query: `ranked` corpus ids, `relevant` {id: grade}; a
    grade below 0 (judged harmful) gains nothing, as in trec_eval: nDCG stays within 1."""
    gains = [max(relevant.get(doc, 0), 0) for doc in ranked[:10]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((max(g, 0) for g in relevant.values()), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    positive = {d for d, g in relevant.items() if g > 0}
    first = next((i for i, d in enumerate(ranked[:10]) if d in positive), None)
    result = {"ndcg@10": dcg / idcg if idcg else 0.0}
    for k in (2, 5, 10):
        result[f"recall@{k}"] = len(positive & set(ranked[:k])) / len(positive) if positive else 0.0
    result["mrr@10"] = 1.0 / (first + 1) if first is not None else 0.0
    return result


def _documents(chunk_ids, external, k):
    """Corpus ids in rank order, each once, at most k."""
    seen = []
    for chunk_id in chunk_ids:
        doc = external.get(chunk_id)
        if doc is not None and doc not in seen:
            seen.append(doc)
            if len(seen) == k:
                break
    return seen


def evaluate(
    conn: Connection,
    queries_path: str | os.PathLike[str],
    qrels_path: str | os.PathLike[str],
    k: int = 10,
    now: str | None = None,
    progress: Callable[[int], object] | None = None,
    per_query: str | os.PathLike[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"queries": N, "full": M, "no_graph": M, "vector": M, "fts": M, "graph": M},
    {"abstained": queries the full pipeline abstained on, "seconds": ..., "relevant": corpus
    ids judged relevant, "missing": those no record's _id in the brain}); InputError when
    none is; with
    `per_query` (a path), each query's metrics are written there as JSON lines."""
    if now:
        parse({"q": "now", "now": now})  # a QueryError naming `now` itself, not the first query's
    queries, qrels = load_queries(queries_path), load_qrels(qrels_path)
    if not any(qid in queries for qid in qrels):
        raise InputError(f"no query of {queries_path} is judged in {qrels_path} (query-id, corpus-id, score per line)")
    if per_query:
        brain = conn.execute("select file from pragma_database_list where name = 'main'").fetchone()[0]
        for given in (queries_path, qrels_path, brain):
            if given and os.path.exists(per_query) and os.path.samefile(per_query, given):
                raise InputError(f"--per-query {per_query} is {given}, an input: give another file")
    try:
        out = open(per_query, "w", encoding="utf-8") if per_query else contextlib.nullcontext()
    except OSError as ex:
        raise InputError(f"--per-query {per_query} cannot be written: {ex.strerror or ex}") from ex
    with out as lines:
        return _evaluate(conn, queries, qrels, k, now, progress, lines)


def _evaluate(conn, queries, qrels, k, now, progress, lines):
    started = time.perf_counter()
    external = dict(conn.execute("select id, external_id from knowledge where external_id is not null"))
    model_id = recorded_model(conn)
    totals = {mode: {} for mode in MODES}
    judged = [qid for qid in qrels if qid in queries]
    relevant = {d for qid in judged for d, grade in qrels[qid].items() if grade > 0}
    missing = relevant - set(external.values())
    if relevant and missing == relevant:  # every metric 0, and nothing said why (review 152)
        some = ", ".join(repr(d) for d in sorted(missing)[:3])
        raise InputError(
            f"no corpus id the qrels judge relevant ({some}...) is a record _id in this brain: ingest the corpus "
            "they judge (a BEIR corpus.jsonl), whose records' _id are those ids"
        )
    abstained = 0
    for qid in judged:
        # more chunks than k, so k distinct records remain after collapsing chunks;
        # rankings are measured whole: no relevance cut-off
        try:
            doc = parse({"q": queries[qid], "k": min(100, 3 * k), "cutoff": False, **({"now": now} if now else {})})
        except QueryError as ex:  # as recall would refuse it: which query
            raise InputError(f"query {qid!r}: {ex}") from ex
        legs = run_legs(conn, doc, model_id, with_graph=True)
        runs = {leg: legs.ranked.get(leg, []) for leg in ("vector", "fts", "graph")}
        without = dataclasses.replace(
            legs,
            ranked={n: r for n, r in legs.ranked.items() if n != "graph"},
            raw={n: r for n, r in legs.raw.items() if n != "graph"},
            entity_seeds=[],
            entity_chunks={},
            telemetry={},
        )
        runs["no_graph"] = [
            h["id"] for h in finish(conn, dataclasses.replace(doc, graph=False), without, model_id)["hits"]
        ]
        full = finish(conn, doc, legs, model_id)
        abstained += full["decision"] == "low_confidence"
        runs["full"] = [h["id"] for h in full["hits"]]
        line = {
            "query_id": qid,
            "text": queries[qid],
            "judged": sorted(d for d, g in qrels[qid].items() if g > 0),
            "abstained": full["decision"] == "low_confidence",
            "ranked": {},
        }
        for mode in MODES:
            ranked = line["ranked"][mode] = _documents(runs[mode], external, k)
            line[mode] = metrics(ranked, qrels[qid])
            for name, value in line[mode].items():
                totals[mode][name] = totals[mode].get(name, 0.0) + value
        if lines:
            lines.write(json.dumps(line, ensure_ascii=False) + "\n")
        if progress:
            progress(1)
    n = len(judged) or 1
    result = {"queries": len(judged)}
    for mode in MODES:
        result[mode] = {name: round(value / n, 4) for name, value in totals[mode].items()}
    seconds = round(time.perf_counter() - started, 1)
    return result, {"abstained": abstained, "seconds": seconds, "relevant": len(relevant), "missing": len(missing)}
