"""The graph leg: Personalized PageRank over entities and chunks, with no LLM.

Seeds are the entities a query names, plus the passages the other legs ranked
highest as weak seeds, as in HippoRAG 2. The walk itself, and the graph it
walks, are the read state's entity graph (entity_graph.py): one copy per brain
file and process, following writes; invisible chunks, and the edges only they
stated, are never walked, so the graph never widens what a caller can read.
"""

from dataclasses import dataclass

import numpy as np

from . import lexical
from . import state as read_state
from .config import COMMON_TERM_SHARE, NAMED_DOCUMENT_SHARE, PASSAGE_SEED_WEIGHT, PASSAGE_SEEDS, RECALL_CANDIDATES
from .entity_graph import Walk
from .schema import recorded_model_and_dimension

SCORE_DECIMALS = 12


@dataclass(frozen=True)
class Named:
    """The entities a text names that the caller can reach: their ids (in the order
    of their nodes, as the walk seeds them), the text's words that name them
    (casefolded, one span a line), and whether one of them is named surely, not
    only by a bare word (entity_graph's seed_spans): the belonging of the text to
    the brain reads that, the walk every seed."""

    ids: list
    words: str
    surely: bool = False


def naming(state, walk, text):
    """[(words, entity node, bare)] of the spans of `text` naming an entity node the
    caller can reach: an entity known only from hidden memories must not change
    the ranking, nor show in telemetry. Like a common word, a name tied to more
    than COMMON_TERM_SHARE of the visible chunks (the speaker of half a
    conversation) tells them apart no better than it would the whole brain: it is
    not a seed. Nor is a name `text` excludes (-Orion: lexical.asked)."""
    graph = state.graph
    limit = COMMON_TERM_SHARE * max(int(walk.visible.sum()), 1)
    known = {}

    def reachable(node):
        if node not in known:
            nodes = np.array([node])
            # counts the node's degree too, from the same ties, unless it is common before the last
            chunks = walk.chunk_degree(nodes, cap=limit)[0]
            known[node] = bool(chunks <= limit and walk.degree(nodes)[0] > 0)
        return known[node]

    def can_reach(entity_id):
        node = graph.entity_node(entity_id)
        return node is not None and reachable(node)

    spans = (
        (w, graph.entity_node(e), bare) for w, e, bare in graph.seed_spans(lexical.asked(text), can_reach, walk.visible)
    )
    return [(words, node, bare) for words, node, bare in spans if node is not None and reachable(node)]


def named_entities(state, walk, text):
    """The entity nodes `text` names that the caller can reach (naming's), sorted."""
    return sorted({node for _, node, _ in naming(state, walk, text)})


def _normalised(scores):
    """Min-max normalised {id: score}, higher is better."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    return {k: (v - low) / (high - low) if high > low else 1.0 for k, v in scores.items()}


def _current(conn):
    return read_state.current(conn, recorded_model_and_dimension(conn)[1])


def walk(conn, text, passages, filters, n=RECALL_CANDIDATES):
    """The graph leg on `conn`'s brain for a caller with `filters`: see walk_in."""
    state = _current(conn)
    with state.lock:
        return walk_in(state, state.chunks.visible(filters), text, passages, n)


def walk_in(state, visible, text, passages, n=RECALL_CANDIDATES, named=None):
    """The graph leg over `state` for a caller who may see the chunk slots in
    `visible`: ([(chunk id, score)] best first, ids of the entities it seeded).
    `named`: the Named of `text` for this caller (named_in_state's), when the
    caller has found it already.

    Seeds are the entities `text` names — each split between its node and, for a
    document, its own chunks — and the first PASSAGE_SEEDS passages of each other
    leg in `passages` ([(leg, chunk id, score)] best first per leg), each at
    PASSAGE_SEED_WEIGHT x its min-max normalised score within its leg. A text that
    names none has no walk: from the passages alone it would echo their legs. Call
    it under the state's lock.
    """
    graph, chunks = state.graph, state.chunks
    walk = Walk(graph, visible)
    if named is None:
        entity_nodes = named_entities(state, walk, text)
    else:
        entity_nodes = [graph.entity_node(entity) for entity in named.ids]
    if not entity_nodes:
        # from the other legs' passages alone the walk is their echo, bent (the leg adds no
        # evidence of its own: docs/evaluation.md): a query naming nothing has no graph leg
        return [], []
    seeds = {}
    where, own = walk.document_chunks(np.array(entity_nodes))
    for i, node in enumerate(entity_nodes):
        mine = graph.chunks.node[own[where == i]]
        seeds[node] = (1 - NAMED_DOCUMENT_SHARE) if len(mine) else 1.0
        for chunk_node in mine.tolist():
            seeds[chunk_node] = seeds.get(chunk_node, 0.0) + NAMED_DOCUMENT_SHARE / len(mine)
    by_leg = {}
    for leg, chunk_id, score in passages:
        if score is None or score != score:
            continue  # no score (a query of no words has no distance to anything: NaN, SQL's NULL) is no evidence
        top = by_leg.setdefault(leg, {})
        if len(top) < PASSAGE_SEEDS and chunk_id not in top:
            top[chunk_id] = score
    for top in by_leg.values():
        for chunk_id, value in _normalised(top).items():
            slot = chunks.slot_of.get(chunk_id)
            if slot is not None:
                node = int(graph.chunks.node[slot])
                seeds[node] = seeds.get(node, 0.0) + PASSAGE_SEED_WEIGHT * value
    nodes, scores = walk.rank(seeds)
    hits = _chunk_scores(graph, walk, nodes, scores, chunks, n)
    seed_ids = [int(graph.nodes.entity[node]) for node in entity_nodes]
    return hits, seed_ids


def _chunk_scores(graph, walk, nodes, scores, chunks, n):
    """[(chunk id, score)] of the `n` best visible chunks. A document and its chunks
    are one thing to a reader, two nodes to the walk: each chunk also gets its
    share of its document node's score, shared among the document's visible chunks."""
    if not len(nodes):
        return []
    slot_of_node = graph.nodes.chunk[nodes]
    own = {}
    is_chunk = slot_of_node >= 0
    for slot, score in zip(slot_of_node[is_chunk].tolist(), scores[is_chunk].tolist()):
        own[slot] = own.get(slot, 0.0) + score
    documents = np.flatnonzero(~is_chunk & (scores > 0))
    where, members = walk.document_chunks(nodes[documents]) if len(documents) else (np.zeros(0, int), np.zeros(0, int))
    count = np.bincount(where, minlength=len(documents))
    shared = {}
    for i, slot in zip(where.tolist(), members.tolist()):
        shared[slot] = scores[documents[i]] * (1.0 / max(count[i], 1))
    slots = np.array(sorted(set(own) | set(shared)), dtype=np.int64)
    if not len(slots):
        return []
    total = np.array([own.get(s, 0.0) + shared.get(s, 0.0) for s in slots.tolist()])
    # to 12 decimals: scores equal but for the order sums were taken in stay equal,
    # and fall back on the id, whatever order the state holds its nodes in
    total = np.round(total, SCORE_DECIMALS)
    keep = walk.visible[slots] & (total > 0)
    slots, total = slots[keep], total[keep]
    ids = chunks.ids(slots)
    order = np.lexsort((ids, -total))[:n]
    return [(int(ids[i]), float(total[i])) for i in order]


def tied_chunks(state, visible, entity_ids):
    """{entity id: (chunk ids tied to it, chunk ids one step away)}, each sorted, in
    the graph as the caller may walk it. Tied: the chunk mentions the entity,
    states an edge with it, or belongs to its document. One step away: the chunk
    belongs to the document of another entity that a relationship or a tied
    chunk links to it (the passage a multi-hop question bridges to). Call it
    under the state's lock."""
    if not entity_ids:
        return {}
    graph = state.graph
    walk = Walk(graph, visible)
    is_chunk = graph.nodes.chunk
    tied = {}
    for entity_id in entity_ids:
        seed = graph.entity_node(entity_id)
        near = walk.neighbours(np.array([seed]))
        near_chunks = near[is_chunk[near] >= 0]
        linked = np.union1d(near, walk.neighbours(near_chunks) if len(near_chunks) else near[:0])
        linked = linked[(is_chunk[linked] < 0) & (linked != seed)]
        direct = np.unique(state.chunks.ids(is_chunk[near_chunks]))
        _, bridged_slots = walk.document_chunks(linked) if len(linked) else (None, np.zeros(0, dtype=np.int64))
        bridged = state.chunks.ids(bridged_slots)
        tied[entity_id] = (direct, np.setdiff1d(bridged, direct))
    return tied


def named_in(conn, text, filters):
    """The Named of `text` for a caller with `filters`."""
    state = _current(conn)
    with state.lock:
        return named_in_state(state, state.chunks.visible(filters), text)


def named_in_state(state, visible, text):
    """The Named of `text` for a caller who may see the chunk slots in `visible`:
    the graph leg's entity seeds, found without walking, and the words naming
    them. Call it under the state's lock."""
    spans = naming(state, Walk(state.graph, visible), text)
    ids = [int(state.graph.nodes.entity[node]) for node in sorted({node for _, node, _ in spans})]
    return Named(ids, "\n".join(words for words, _, _ in spans), not all(bare for *_, bare in spans))
