"""Hybrid recall: vector, lexical and graph legs fused (fusion.py: a convex
combination of their scores, or weighted RRF when the graph leads), with a
quality estimate, pseudo-relevance feedback, abstention and provenance.

Every answer explains itself: `query` echoes the request as it was run (defaults
applied, dates read from the text, the text searched), an empty answer says why
(`reason`), and each hit carries its own `relevance`, the probability that it is
relevant (quality.hit_relevance).

Every leg applies the same Filters, inside its own search: vec0 metadata
constraints in the KNN, SQL on knowledge in the FTS5 query, a mask in the graph.
"""

import dataclasses
import datetime
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import bm25, dialogue, embed, graph, lexical, quality, temporal, values
from . import reach as reachable
from . import state as read_state
from .config import ABSTAIN_BELOW, EVIDENCE_CUTOFF, RECALL_CANDIDATES, RRF_K, requested_model
from .connection import Connection
from .fields import time_zone
from .filters import Filters
from .fusion import boosted, fuse, fused, graph_leads, leg_weights, method
from .querydoc import QueryDoc, parse
from .schema import check_model, check_width, recorded_model
from .vectors import quantize_int8, vector_rows

HIT_COLUMNS = (
    "id",
    "title",
    "content",
    "class",
    "scope",
    "source",
    "domain",
    "node_kind",
    "lawful_basis",
    "region",
    "heading_path",
    "source_path",
    "line_start",
    "line_end",
    "document_id",
    "external_id",
    "observed_at",
    "expires_at",
    "relevance_tier",
    "confidence",
    "valid_from",
    "valid_to",
    "superseded_at",
    "superseded_by",
)


# the columns fusion.boosted computes a hit's score with: a hit holding a value of the
# wrong kind in one (values.RULES, as check names them) is not answered
BOOSTED = ("observed_at", "confidence")


@dataclass
class Legs:
    """What each leg found for one query: ranked ids and their raw scores."""

    text: str  # the query text the legs searched (date phrases removed)
    filters: Filters
    terms: bm25.TermStats  # this query's term statistics over the rows it can reach, read once
    question: str = ""  # the query as asked: where its sentences start, the names it writes
    ranked: dict = field(default_factory=dict)  # leg -> [id, ...] best first
    raw: dict = field(default_factory=dict)  # leg -> {id: raw score}
    entity_seeds: list = field(default_factory=list)  # ids of the entities the graph walk started from
    # ids of the entities the query names that the caller can reach, found whether
    # or not the graph leg runs: the belonging model reads them in every mode
    named: list = field(default_factory=list)
    named_surely: bool = False  # one of them named by more than a bare word (graph.Named.surely)
    # named by bare words only: the vector leg's best cosine among the chunks tied to them
    named_similarity: float = 0.0
    # the idf-weighted share of the searched terms held by the words naming them (fusion.graph_leads)
    named_share: float = 0.0
    telemetry: dict = field(default_factory=dict)
    vectors: np.ndarray | None = None  # the query's embedding (float32, one row)
    entity_chunks: dict = field(default_factory=dict)  # seeded entity id -> (chunk ids tied to it, one step away)
    model_id: str | None = None  # the brain's model: its dense leg's strength sets its weight
    state: object = None  # the read state the legs searched (None inside a transaction of the connection's own)
    graph_visible: bool = True  # False: the caller may not read the graph, and nothing is drawn from it
    # the speakers the query names of the session its best candidate is a turn of, of the
    # turns the caller can read (dialogue.speakers_asked): the quality models read them as `speaker`
    speakers: set = field(default_factory=set)

    @property
    def graph_leads(self):
        """Whether the graph walk leads the fusion: it walked from the entities the
        query names, and their words hold enough of the query (fusion.graph_leads)."""
        return bool(self.entity_seeds) and graph_leads(self.named_share)

    def weights(self):
        return leg_weights(self.graph_leads, self.model_id)

    def fuse(self):
        """[(id, fused score, {leg: rank})] best first: fusion.fused for this query."""
        return fused(self.ranked, self.raw, self.graph_leads, self.model_id)


def _timed(telemetry, name, started):
    telemetry[f"{name}_ms"] = round((time.perf_counter() - started) * 1000, 3)


def vector_leg(conn, vector_int8, filters, n=RECALL_CANDIDATES):
    """[(id, cosine distance)] nearest first; every filter is a vec0 constraint.
    The SQL counterpart of ChunkIndex.nearest, which recall uses: both return the same."""
    condition, params = filters.sql()
    rows = conn.execute(
        "select knowledge_id, distance from vec_knowledge "
        f"where embedding_int8 match vec_int8(?) and k = ? and {condition}",
        [vector_int8, n, *params],
    ).fetchall()
    return sorted(rows, key=lambda row: (row[1], row[0]))  # equal distances: lower id first


def fts_leg(terms, text):
    """[(id, bm25)] best first for `text`, over the rows `terms` (a TermStats) can
    reach, its words most of those rows hold left out (FTS5's bm25 is negative:
    lower is better)."""
    return bm25.search(terms, lexical.plan(text, terms.common_words(text), terms.documents))


_VECTOR_LEGS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="brain-vector")


def _vector_leg(state, vectors, visible):
    """(hits, milliseconds) of the in-memory vector leg, for a worker thread; the
    caller holds the state's lock until it has the result."""
    started = time.perf_counter()
    hits = state.chunks.nearest(quantize_int8(vectors)[0].tobytes(), visible, RECALL_CANDIDATES)
    return hits, round((time.perf_counter() - started) * 1000, 3)


def run_legs(conn, doc, model_id, with_graph=None, vectors=None, graph_visible=True):
    """Search every leg once for `doc` (a QueryDoc); `vectors` is the searched
    text's embedding when the caller has it already. Without `graph_visible`
    nothing is read from the graph: no walk, and no entity the query names."""
    if vectors is None:  # the model's vectors as wide as the stored ones, before any is made or read
        check_width(conn, model_id)
    with_graph = (doc.graph if with_graph is None else with_graph) and graph_visible
    now = datetime.datetime.strptime(doc.now, "%Y-%m-%d %H:%M:%S")

    def covered(since, until):  # whether the request reaches memories observed then
        return reachable.of(conn, Filters.from_querydoc(doc, since, until)).count > 0

    zone = time_zone(doc.timezone)[1] if doc.timezone else None
    since, until, text = temporal.extract(doc.q, now, covered, zone)
    filters = Filters.from_querydoc(doc, since, until)
    text = text or doc.q
    telemetry = {}
    started = time.perf_counter()
    if vectors is None:
        vectors = embed.embed([lexical.asked(text)], model_id)
    _timed(telemetry, "embed", started)
    started = time.perf_counter()
    state = read_state.current(conn, vectors.shape[1])
    _timed(telemetry, "state", started)
    with state.lock:
        visible = state.chunks.visible(filters)
        # inside a transaction of its own, a connection may see rows the shared state does not
        reach = reachable.of(conn, filters) if conn.in_transaction else reachable.in_state(state, visible)
        index = None if conn.in_transaction else bm25.StateIndex(state, visible, conn)
        legs = Legs(
            text=text,
            question=doc.q,
            filters=filters,
            terms=bm25.TermStats(conn, reach, index),
            telemetry=telemetry,
            vectors=vectors,
            model_id=model_id,
            state=None if conn.in_transaction else state,
            graph_visible=graph_visible,
        )
        t = legs.telemetry
        # the vector leg (numpy) runs beside the lexical one (SQLite): both let go of the GIL
        nearest = _VECTOR_LEGS.submit(_vector_leg, state, vectors, visible) if vectors.any() else None
        started = time.perf_counter()
        hits = fts_leg(legs.terms, legs.text)
        legs.ranked["fts"] = [h[0] for h in hits]
        legs.raw["fts"] = {h[0]: -h[1] for h in hits}
        _timed(t, "fts", started)
        if nearest:
            hits, t["vector_ms"] = nearest.result()
            legs.ranked["vector"] = [h[0] for h in hits]
            legs.raw["vector"] = {h[0]: 1.0 - h[1] for h in hits}  # cosine similarity
        if graph_visible:  # the entities q names are the graph's
            started = time.perf_counter()
            named = graph.named_in_state(state, visible, legs.text)
            legs.named, legs.named_surely = named.ids, named.surely
            if named.ids:
                legs.named_share = legs.terms.share(legs.text, lexical.indexed_terms(named.words))
            if named.ids and not named.surely:
                tied = {int(c) for direct, _ in graph.tied_chunks(state, visible, named.ids).values() for c in direct}
                near = [cosine for item, cosine in legs.raw.get("vector", {}).items() if item in tied]
                legs.named_similarity = max(near, default=0.0)
            _timed(t, "named", started)
        if with_graph:
            started = time.perf_counter()
            passages = [
                (leg, item, legs.raw[leg][item]) for leg in ("vector", "fts") for item in legs.ranked.get(leg, [])
            ]
            hits, legs.entity_seeds = graph.walk_in(state, visible, legs.text, passages, named=named)
            legs.ranked["graph"] = [h[0] for h in hits]
            legs.raw["graph"] = {h[0]: h[1] for h in hits}
            legs.entity_chunks = graph.tied_chunks(state, visible, legs.entity_seeds)
            _timed(t, "graph", started)
    for name, ids in legs.ranked.items():
        t[f"{name}_candidates"] = len(ids)
    return legs


def recall(
    conn: Connection, query: QueryDoc | dict[str, Any], model_id: str | None = None, graph_visible: bool = True
) -> dict[str, Any]:
    """Recall memories for `query` (a QueryDoc or its JSON object) from the brain on `conn`.

    Returns {"decision", "reason", "message", "query", "hits", "quality",
    "telemetry"}; abstains with {"decision": "low_confidence", "hits": []} when
    the evidence is too weak, and says why any answer is empty. Without
    `graph_visible` (a caller who may not read the entity graph's tables) the answer
    is the one the brain would give without its graph: no graph leg, no entity
    the query names, no conversation session or speaker.
    """
    started = time.perf_counter()
    doc = parse(query)
    if not graph_visible:  # the request as it is run: the graph leg is off
        doc = dataclasses.replace(doc, graph=False)
    requested = requested_model()
    if requested:
        check_model(conn, requested)
    model_id = model_id or recorded_model(conn)
    legs = run_legs(conn, doc, model_id, graph_visible=graph_visible)
    result = finish(conn, doc, legs, model_id)
    result["telemetry"]["total_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return result


def model_ready(conn: Connection) -> None:
    """Raise what every recall of this brain meets before it reads a memory (a
    ModelError: its model not installed here, or of another width than its vectors),
    in recall's words; the recall canned query's functions say it only to the log."""
    model_id = recorded_model(conn)
    check_width(conn, model_id)
    embed.get_model(model_id)


def finish(conn, doc, legs, model_id):
    """Fuse the legs, judge quality, expand or rescue, abstain or return hits."""
    t = legs.telemetry
    started = time.perf_counter()
    fused = legs.fuse()
    _timed(t, "fusion", started)
    sessions = read_speakers(conn, doc, legs, fused)
    assessment = quality.assess(conn, legs, fused)
    if assessment.recommendation == "clarify_query" and legs.ranked.get("graph") and not legs.graph_leads:
        # the graph rescue pass: an ambiguous query gets one bounded re-ranking
        # led by the graph walk over the other legs' passages, before abstaining
        rescued = fuse(legs.ranked, leg_weights(True))
        second = quality.assess(conn, legs, rescued)
        t["graph_rescue"] = second.confidence > assessment.confidence
        if t["graph_rescue"]:
            fused, assessment = rescued, second
    expansion = []
    if assessment.recommendation == "run_prf" and doc.prf and legs.weights().get("prf"):
        started = time.perf_counter()
        expansion = quality.expansion_terms(conn, legs, fused)
        if expansion:
            hits = fts_leg(legs.terms, legs.text + " " + " ".join(expansion))
            legs.ranked["prf"] = [h[0] for h in hits]
            legs.raw["prf"] = {h[0]: -h[1] for h in hits}
            fused = legs.fuse()
            sessions = None  # other candidates: their sessions are read again
        _timed(t, "prf", started)
    if legs.graph_visible:
        fused = dialogue.rescored(conn, doc.q, fused, legs.filters, sessions)
    t["fused_count"] = len(fused)
    t["fusion"] = "rrf" if t.get("graph_rescue") else method(legs.graph_leads)
    t["rrf_k"] = RRF_K
    t["entity_seeds"] = len(legs.entity_seeds)
    t["confidence"] = assessment.confidence
    t["recommendation"] = assessment.recommendation
    report = assessment.report()
    if assessment.abstain:
        reason = "no_candidates" if not fused else "low_confidence"
        return _answer(conn, doc, legs, model_id, "low_confidence", [], report, reason)
    rows = _rows(conn, [item for item, _, _ in fused[: max(doc.k * 3, 30)]], legs.filters)
    ranked = _boosted(fused, rows, doc.now)
    if doc.mmr:
        ranked = _mmr(conn, ranked, doc.k, doc.mmr_lambda)
    fused_scores = {item: score for item, score, _ in fused}
    chosen = _evidenced(conn, legs, ranked, fused_scores, assessment.confidence, doc.k, doc.cutoff)
    hits = []
    for (item, score, ranks), evidence in chosen:
        hit = dict(rows[item])
        hit["score"] = score
        hit["relevance"] = round(evidence.relevance, 4)
        if doc.provenance:
            hit["provenance"] = _provenance(legs, item, ranks, fused_scores[item], expansion, evidence)
        hits.append(hit)
    reason = "no_candidates" if not hits else None  # every row changed since the legs searched
    if doc.max_tokens and hits:
        hits, first = _pack(hits, doc.max_tokens, model_id, t)
        if not hits:
            reason = "token_budget"
            t["first_hit_tokens"] = first
    return _answer(conn, doc, legs, model_id, "ok", hits, report, reason)


def _evidenced(conn, legs, ranked, fused_scores, confidence, k, cutoff):
    """[((item, score, ranks), quality.Evidence)] of the first `k` of `ranked`; with
    `cutoff`, a hit whose evidence strength is below EVIDENCE_CUTOFF (no evidence
    for the query) is left out — never the first: whether to answer at all is
    abstention's call. Evidence is read a batch of `k` at a time, as far down as
    needed; each hit's standing is its place in `ranked` and its share of the
    first's fused score."""
    chosen, at = [], 0
    best = max(fused_scores.values(), default=0.0)
    while len(chosen) < k and at < len(ranked):
        batch = ranked[at : at + k]
        standing = {
            item: (at + i + 1, fused_scores[item] / best if best > 0 else 0.0) for i, (item, _, _) in enumerate(batch)
        }
        at += len(batch)
        evidence = quality.hit_relevance(conn, legs, standing, confidence)
        for entry in batch:
            found = evidence[entry[0]]
            if cutoff and chosen and found.strength < EVIDENCE_CUTOFF:
                continue
            chosen.append((entry, found))
            if len(chosen) == k:
                break
        if not cutoff:
            break
    return chosen


REASONS = {
    "low_confidence": "nothing the request can reach answers the query with enough confidence (below {abstain})",
    "no_candidates": "no memory the request can reach matched the query",
    "no_memories": "the filters leave no memory to search",
    "only_decayed": (
        "nothing live matches; expired or archived memories do: recall with include_decayed: true to see them"
    ),
    "token_budget": "the first hit takes {tokens} tokens, more than max_tokens ({budget}) allows",
}


def _answer(conn, doc, legs, model_id, decision, hits, report, reason):
    """The response: `reason` (and a `message` saying it in words) only when
    there are no hits; an empty answer to a request that left out expired and
    archived memories is checked for matches among them (only_decayed)."""
    t = legs.telemetry
    message_key = reason
    if not hits and reason in ("low_confidence", "no_candidates") and not doc.include_decayed:
        started = time.perf_counter()
        if _only_decayed(conn, doc, legs, model_id):
            reason = message_key = "only_decayed"
        _timed(t, "decayed_check", started)
    if reason == "no_candidates" and not legs.terms.reach.count:
        message_key = "no_memories"
    message = None
    if reason:
        message = REASONS[message_key].format(
            abstain=ABSTAIN_BELOW, tokens=t.get("first_hit_tokens"), budget=doc.max_tokens
        )
    return {
        "decision": decision,
        "reason": reason,
        "message": message,
        "query": _echo(doc, legs),
        "hits": hits,
        "quality": report,
        "telemetry": t,
    }


def _echo(doc, legs):
    """The request as it was run: every QueryDoc field with its default applied,
    since / until as applied (from the request, or else read from the text), and
    the text that was searched (the query without its date phrases)."""
    echo = {name: getattr(doc, name) for name in doc.__dataclass_fields__}
    for name in ("sources", "classes"):
        echo[name] = list(echo[name]) if echo[name] is not None else None
    echo["since"], echo["until"] = legs.filters.since, legs.filters.until
    echo["min_relevance"] = legs.filters.min_relevance
    echo["searched"] = legs.text
    return echo


def read_speakers(conn, doc, legs, fused):
    """Set legs.speakers, the speakers the query names of the session its best fused
    candidate is a turn of (dialogue.speakers_asked); returns the sessions of the
    candidates (dialogue.session_turns), None when the caller may not read the graph
    (sessions and speakers are the graph's)."""
    if not legs.graph_visible:
        return None
    sessions = dialogue.session_turns(conn, [item for item, _, _ in fused], legs.filters)
    if fused:
        legs.speakers = dialogue.speakers_asked(
            doc.q, dialogue.session_speakers(conn, sessions, fused[0][0], legs.filters)
        )
    return sessions


def _only_decayed(conn, doc, legs, model_id):
    """Whether expired or archived memories answer the query that live ones do
    not: the lexical and vector legs run again with them admitted (same
    embedding, no graph), and their fused answer must be confident and led by a
    decayed memory. Run only for an empty answer."""
    wider = dataclasses.replace(doc, include_decayed=True)
    if (
        reachable.of(conn, Filters.from_querydoc(wider, legs.filters.since, legs.filters.until)).count
        <= legs.terms.reach.count
    ):
        return False  # nothing expired or archived in reach
    decayed = run_legs(conn, wider, model_id, with_graph=False, vectors=legs.vectors, graph_visible=legs.graph_visible)
    fused = decayed.fuse()
    read_speakers(conn, wider, decayed, fused)
    if quality.assess(conn, decayed, fused).abstain:
        return False
    return not _rows(conn, [fused[0][0]], legs.filters)  # the top hit is not live


def _rows(conn, ids, filters):
    """The hits' rows, each read with the filters checked again: a row changed
    since the legs searched (moved to another scope, flagged, rewritten) is never
    returned as it is now, whatever any leg saw."""
    if not ids:
        return {}
    condition, params = filters.sql("knowledge")
    cursor = conn.execute(
        f"select {', '.join(HIT_COLUMNS)} from knowledge where id in (select value from json_each(?)) and {condition}",
        [json.dumps(ids), *params],
    )
    rows = {row[0]: dict(zip(HIT_COLUMNS, row)) for row in cursor}
    wrong = values.invalid_in(conn, "knowledge", list(rows), BOOSTED) if rows else []
    if wrong:  # a score computed from a value check names is no answer (1e308 confidence: any hit first)
        raise values.faulted(wrong)
    return rows


def _boosted(fused, rows, now):
    """Re-sort by fused score nudged by recency and confidence (fusion.boosted)."""
    now_day = datetime.datetime.strptime(now, "%Y-%m-%d %H:%M:%S")
    ranked = [
        (item, boosted(score, rows[item]["observed_at"], rows[item]["confidence"], now_day), ranks)
        for item, score, ranks in fused
        if item in rows
    ]
    ranked.sort(key=lambda r: (-r[1], r[0]))
    return ranked


def _mmr(conn, ranked, k, lam):
    """Maximal Marginal Relevance over the candidates' stored vectors, one matrix
    product a pick: value = lam * relevance - (1 - lam) * the highest similarity to
    a hit already chosen (0 until one with a vector is), ties to the lower id."""
    if not ranked:
        return ranked
    ids = np.array([item for item, _, _ in ranked])
    stored = dict(vector_rows(conn, "embedding_int8", ids.tolist()))
    has = np.array([item in stored for item in ids.tolist()])
    vectors = np.zeros((len(ids), len(next(iter(stored.values()), b"\0"))), dtype=np.float32)
    for row, item in enumerate(ids.tolist()):
        if item in stored:
            vectors[row] = np.frombuffer(stored[item], dtype=np.int8)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    relevance = np.array([score for _, score, _ in ranked]) / max(score for _, score, _ in ranked)
    nearest = np.full(len(ids), -np.inf)  # highest similarity to a chosen hit with a vector
    open_ = np.ones(len(ids), dtype=bool)
    chosen = []
    for _ in range(min(k, len(ids))):
        similarity = np.where(has & np.isfinite(nearest), nearest, 0.0)
        value = np.where(open_, lam * relevance - (1 - lam) * similarity, -np.inf)
        tied = np.flatnonzero(value == value.max())
        pick = tied[np.argmin(ids[tied])]
        chosen.append(pick)
        open_[pick] = False
        if has[pick]:
            nearest = np.maximum(nearest, np.where(has, vectors @ vectors[pick], -np.inf))
    return [ranked[i] for i in chosen] + [ranked[i] for i in np.flatnonzero(open_)]


def _pack(hits, budget, model_id, telemetry):
    """(the hits that fit in `budget` tokens of the model's tokenizer, the first
    hit's tokens): taken in rank order up to the first that does not fit, so a
    lower hit never takes the place of a higher one."""
    packed, used = [], 0
    counts = embed.count_tokens([h["content"] for h in hits], model_id)
    for hit, tokens in zip(hits, counts):
        if used + tokens > budget:
            break
        packed.append(hit)
        used += tokens
    telemetry["tokens"] = used
    return packed, counts[0]


def _provenance(legs, item, ranks, fused_score, expansion, evidence):
    """Why this hit: its rank and raw score in each leg, the fused score, and the
    evidence its relevance was read from."""
    bm25 = legs.raw.get("fts", {}).get(item)
    return {
        "vector_rank": ranks.get("vector"),
        "fts_rank": ranks.get("fts"),
        "graph_rank": ranks.get("graph"),
        "prf_rank": ranks.get("prf"),
        "vector_similarity": legs.raw.get("vector", {}).get(item),
        "fts_bm25": -bm25 if bm25 is not None else None,
        "graph_score": legs.raw.get("graph", {}).get(item),
        "fused_score": fused_score,
        "expansion_terms": expansion,
        "prf_expanded": bool(expansion),
        "evidence": evidence.report(),
    }
