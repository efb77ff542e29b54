"""The graph leg: Personalized PageRank over entities and chunks, with no LLM.

Nodes are entities and chunks. Edges are the relationships between entities,
weighted by type (tagged_with, alias_of 0.1; others 1.0) and damped at hubs by
w * min(1, θ / deg), θ = 50; a chunk is tied to its document's entity and to
both ends of every edge its text stated (relationships.knowledge_id). Seeds are
the entities a query names, plus the passages the other legs ranked highest as
weak seeds, as in HippoRAG 2. Invisible chunks — and the edges only they stated —
are cut out before the walk, so the graph never widens what a caller can read.

The graph is the read state's (state.py): one copy per brain file and process,
following writes.
"""

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from . import state as read_state
from .config import COMMON_TERM_SHARE, NAMED_DOCUMENT_SHARE, PASSAGE_SEED_WEIGHT, PASSAGE_SEEDS, PPR_DAMPING, PPR_THETA, RECALL_CANDIDATES
from .schema import recorded_model_and_dimension

MAX_ITERATIONS = 20
TOLERANCE = 1e-6
SCORE_DECIMALS = 12
CACHED_WALKS = 4


@dataclass
class Walk:
    """The graph as one caller may walk it: visible nodes, and the directed edges
    between them with each step's transition probability."""

    source: np.ndarray
    chunk_degree: np.ndarray  # per node: the visible chunks of other documents tied to it
    transition: csr_matrix  # [target, source]: the share of a node's score each step moves on
    dangling: np.ndarray  # nodes with no way out
    node_visible: np.ndarray
    visible_chunks: np.ndarray  # over chunk slots


def prepare(state, visible_chunks):
    """The walk over the chunks in `visible_chunks` (a mask over chunk slots) and
    every entity; the last few are kept per state version."""
    key = (state.version, hash(visible_chunks.tobytes()))
    with state.walks_lock:
        cached = state.walks.get(key)
    if cached is not None:
        return cached
    nodes, ties = state.nodes, state.ties
    node_visible = nodes.live.copy()
    is_chunk = nodes.chunk >= 0
    node_visible[is_chunk] &= visible_chunks[nodes.chunk[is_chunk]]
    alive = ties.live & nodes.live[ties.a] & nodes.live[ties.b]
    a, b, type_weight, owner, mention, edge_a, edge_b = (
        ties.arrays[name][: ties.size][alive] for name in ("a", "b", "weight", "owner", "mention", "edge_a", "edge_b")
    )
    n = nodes.size
    seen = node_visible[a] & node_visible[b] & ((owner < 0) | node_visible[np.maximum(owner, 0)])
    # an entity is known to the caller only from what it may read: a visible
    # chunk's document, or a relationship a visible chunk stated. A mention of a
    # name that only hidden memories introduce is not walked.
    introduced = is_chunk.copy()
    stated = seen & ~mention
    introduced[a[stated]] = True
    introduced[b[stated]] = True
    node_visible &= introduced
    keep = seen & (~mention | (introduced[np.maximum(edge_a, 0)] & introduced[np.maximum(edge_b, 0)]))
    source, target = np.concatenate([a[keep], b[keep]]), np.concatenate([b[keep], a[keep]])
    type_weight = np.concatenate([type_weight[keep], type_weight[keep]])
    # hubs are damped by the degree the caller sees: hidden edges count for nothing
    degree = np.bincount(source, minlength=n)
    weight = type_weight * np.minimum(1.0, PPR_THETA / np.maximum(degree[target], 1))
    out = np.bincount(source, weights=weight, minlength=n)
    transition = csr_matrix((weight / out[source], (target, source)), shape=(n, n))
    # the chunks of other documents tied to each node: a document's own chunks never make it common
    from_chunk = is_chunk[source]
    own = state.chunks.doc_node[nodes.chunk[source[from_chunk]]] == target[from_chunk]
    pairs = np.unique(np.stack([target[from_chunk][~own], source[from_chunk][~own]]), axis=1)  # a chunk tied twice counts once
    chunk_degree = np.bincount(pairs[0], minlength=n)
    walk = Walk(source, chunk_degree, transition, np.flatnonzero(out == 0), node_visible, visible_chunks)
    with state.walks_lock:
        while len(state.walks) >= CACHED_WALKS:
            state.walks.pop(next(iter(state.walks)))
        state.walks[key] = walk
    return walk


def rank(walk, seeds, damping=PPR_DAMPING):
    """PPR scores of every node from `seeds` ({node: weight}), walking only visible
    nodes and edges. With damping 0.5 the mass still moving halves each step, so a
    few steps settle the ranking."""
    n = len(walk.node_visible)
    restart = np.zeros(n)
    for node, value in seeds.items():
        if walk.node_visible[node]:
            restart[node] += value
    if restart.sum() <= 0:
        return np.zeros(n)
    restart /= restart.sum()
    scores = restart.copy()
    for _ in range(MAX_ITERATIONS):
        spread = walk.transition @ scores
        # mass at nodes with no way out goes back to the seeds
        updated = (1 - damping) * restart + damping * (spread + scores[walk.dangling].sum() * restart)
        converged = np.abs(updated - scores).sum() < TOLERANCE
        scores = updated
        if converged:
            break
    return scores


def named_entities(state, walk, text):
    """The entity nodes `text` names that the caller can reach: an entity known
    only from hidden memories must not change the ranking, nor show in telemetry.
    Like a common word, a name tied to more than COMMON_TERM_SHARE of the visible
    chunks (the speaker of half a conversation) tells them apart no better than
    it would the whole brain: it is not a seed."""
    reachable = np.zeros(len(walk.node_visible), dtype=bool)
    reachable[walk.source] = True
    reachable &= walk.chunk_degree <= COMMON_TERM_SHARE * max(int(walk.visible_chunks.sum()), 1)

    def can_reach(entity_id):
        node = state.entity_node.get(entity_id)
        return node is not None and bool(reachable[node])

    nodes = (state.entity_node.get(e) for e in state.seed_entities(text, can_reach, walk.visible_chunks))
    return sorted(node for node in nodes if node is not None and reachable[node])


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
        return walk_in(state, state.visible_chunks(filters), text, passages, n)


def walk_in(state, visible, text, passages, n=RECALL_CANDIDATES):
    """The graph leg over `state` for a caller who may see the chunk slots in
    `visible`: ([(chunk id, score)] best first, ids of the entities it seeded).

    Seeds are the entities `text` names — each split between its node and, for a
    document, its own chunks — and the first PASSAGE_SEEDS passages of each other
    leg in `passages` ([(leg, chunk id, score)] best first per leg), each at
    PASSAGE_SEED_WEIGHT x its min-max normalised score within its leg. Call it
    under the state's lock.
    """
    chunks = state.chunks
    prepared = prepare(state, visible)
    entity_nodes = named_entities(state, prepared, text)
    live_documents = prepared.visible_chunks & (chunks.doc_node >= 0)  # a document's share: its visible chunks
    members = np.bincount(chunks.doc_node[live_documents], minlength=state.nodes.size)
    seeds = {}
    for node in entity_nodes:
        own = chunks.node[live_documents & (chunks.doc_node == node)]
        seeds[node] = (1 - NAMED_DOCUMENT_SHARE) if len(own) else 1.0
        for chunk_node in own:
            seeds[int(chunk_node)] = seeds.get(int(chunk_node), 0.0) + NAMED_DOCUMENT_SHARE / len(own)
    by_leg = {}
    for leg, chunk_id, score in passages:
        top = by_leg.setdefault(leg, {})
        if len(top) < PASSAGE_SEEDS and chunk_id not in top:
            top[chunk_id] = score
    for top in by_leg.values():
        for chunk_id, value in _normalised(top).items():
            slot = state.chunk_slot.get(chunk_id)
            if slot is not None:
                node = int(chunks.node[slot])
                seeds[node] = seeds.get(node, 0.0) + PASSAGE_SEED_WEIGHT * value
    scores = rank(prepared, seeds)
    # a document and its chunks are one thing to a reader, two nodes to the walk:
    # each chunk also gets its share of its document node's score
    document = np.maximum(chunks.doc_node, 0)
    share = 1.0 / np.maximum(members[document], 1)
    chunk_scores = scores[chunks.node] + np.where(chunks.doc_node >= 0, scores[document], 0.0) * share
    # to 12 decimals: scores equal but for the order sums were taken in stay equal,
    # and fall back on the id, whatever order the state holds its nodes in
    chunk_scores = np.round(chunk_scores, SCORE_DECIMALS)
    candidates = np.flatnonzero(prepared.visible_chunks & (chunk_scores > 0))
    order = candidates[np.lexsort((chunks.id[candidates], -chunk_scores[candidates]))][:n]
    hits = [(int(chunks.id[j]), float(chunk_scores[j])) for j in order]
    seed_ids = [int(state.nodes.entity[node]) for node in entity_nodes]
    return hits, seed_ids


def named_in(conn, text, filters):
    """Entity ids `text` names that a caller with `filters` can reach."""
    state = _current(conn)
    with state.lock:
        return [int(state.nodes.entity[node]) for node in named_entities(state, prepare(state, state.visible_chunks(filters)), text)]
