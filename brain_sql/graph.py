"""The graph leg: Personalized PageRank over entities and chunks, with no LLM.

Nodes are entities and chunks. Edges are the relationships between entities,
weighted by type (tagged_with, alias_of 0.1; others 1.0) and damped at hubs by
w * min(1, θ / deg), θ = 50; a chunk is tied to its document's entity and to
both ends of every edge its text stated (relationships.knowledge_id). Seeds are
the entities a query names, plus the passages the other legs ranked highest as
weak seeds, as in HippoRAG 2. Invisible chunks — and the edges only they stated —
are cut out before the walk, so the graph never widens what a caller can read.

The graph is cached per connection and rebuilt when the file changes.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from . import mentions
from .config import (
    DEFAULT_EDGE_WEIGHT, DOCUMENT_TIE_WEIGHT, EDGE_TYPE_WEIGHTS, NAMED_DOCUMENT_SHARE, PASSAGE_SEED_WEIGHT,
    PASSAGE_SEEDS, PPR_DAMPING, PPR_THETA, RECALL_CANDIDATES,
)  # fmt: skip
from .vectors import VEC_METADATA, vec_metadata_values

MAX_ITERATIONS = 20
TOLERANCE = 1e-6


@dataclass
class Graph:
    entity_ids: np.ndarray  # node i < E is entity entity_ids[i]
    chunk_ids: np.ndarray  # node E + j is chunk chunk_ids[j]
    source: np.ndarray  # directed edges (both directions of every tie)
    target: np.ndarray
    weight: np.ndarray  # type weight * hub dampening of the source node
    owner: np.ndarray  # the chunk index whose visibility the edge needs, -1 for none
    columns: dict  # chunk filter columns (VEC_METADATA), numpy arrays
    automaton: object  # entity names (and aliases) -> entity id, for query seeds
    entity_index: dict  # entity id -> node
    document_chunks: dict  # document entity node -> its chunk nodes
    chunk_document: np.ndarray  # per chunk: its document entity's node, -1 for none
    chunk_share: np.ndarray  # per chunk: 1 / the number of chunks in its document
    walks: dict = field(default_factory=dict)  # visibility mask -> prepared walk

    @property
    def entities(self):
        return len(self.entity_ids)

    def chunk_node(self, chunk_ids):
        """Node numbers of the given chunk ids (those not in the graph are dropped)."""
        index = np.searchsorted(self.chunk_ids, chunk_ids)
        index = np.clip(index, 0, max(len(self.chunk_ids) - 1, 0))
        found = (len(self.chunk_ids) > 0) & (self.chunk_ids[index] == chunk_ids)
        return self.entities + index[found], found

    def seeds_in(self, text):
        """Entity nodes the text names: whole words, any case, longest match wins."""
        spans = sorted(mentions.spans(self.automaton, text), key=lambda s: (-(s[1] - s[0]), s[0]))
        taken, nodes = [], []
        for start, end, target in spans:
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            if target in self.entity_index:
                nodes.append(self.entity_index[target])
        return sorted(set(nodes))

    def named_entities(self, text, visible):
        """The entity nodes `text` names that the caller can reach: an entity known
        only from hidden memories must not change the ranking, nor show in telemetry."""
        walkable = self._walkable(visible)[0]
        return [node for node in self.seeds_in(text) if np.any(walkable == node)]

    def chunk_scores(self, scores):
        """Each chunk's PPR score plus its share of its document node's: a document
        and its chunks are one thing to a reader, two nodes to the walk."""
        shared = np.where(self.chunk_document >= 0, scores[np.maximum(self.chunk_document, 0)], 0.0)
        return scores[self.entities :] + shared * self.chunk_share

    def _walkable(self, visible):
        """(source, target, step, dangling) of the walk over visible nodes and
        edges; the last few visibility masks' walks are kept."""
        key = hash(visible.tobytes())
        cached = self.walks.get(key)
        if cached is not None:
            return cached
        n = self.entities + len(self.chunk_ids)
        node_visible = np.concatenate([np.ones(self.entities, dtype=bool), visible])
        keep = node_visible[self.source] & node_visible[self.target]
        keep &= (self.owner < 0) | visible[np.maximum(self.owner, 0)]
        source, target, weight = self.source[keep], self.target[keep], self.weight[keep]
        out = np.bincount(source, weights=weight, minlength=n)
        walk = (source, target, weight / out[source], out == 0, node_visible)
        if len(self.walks) >= 4:
            self.walks.pop(next(iter(self.walks)))
        self.walks[key] = walk
        return walk

    def rank(self, seeds, visible, damping=None):
        """PPR scores of every node from `seeds` ({node: weight}), walking only
        visible chunks and the edges they may see. With damping 0.5 the mass
        still moving halves each step, so a few steps settle the ranking."""
        damping = PPR_DAMPING if damping is None else damping
        n = self.entities + len(self.chunk_ids)
        source, target, step, dangling, node_visible = self._walkable(visible)
        restart = np.zeros(n)
        for node, value in seeds.items():
            if node_visible[node]:
                restart[node] += value
        if restart.sum() <= 0:
            return np.zeros(n)
        restart /= restart.sum()
        scores = restart.copy()
        for _ in range(MAX_ITERATIONS):
            spread = np.bincount(target, weights=step * scores[source], minlength=n)
            # mass at nodes with no way out goes back to the seeds
            updated = (1 - damping) * restart + damping * (spread + scores[dangling].sum() * restart)
            converged = np.abs(updated - scores).sum() < TOLERANCE
            scores = updated
            if converged:
                break
        return scores


def _normalised(scores):
    """Min-max normalised {id: score}, higher is better."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    return {k: (v - low) / (high - low) if high > low else 1.0 for k, v in scores.items()}


def walk(conn, text, passages, filters, n=RECALL_CANDIDATES):
    """The graph leg: ([(chunk id, score)] best first, entity seed nodes).

    Seeds are the entities `text` names — each split between its node and, for a
    document, its own chunks — and the first PASSAGE_SEEDS passages of each other
    leg in `passages` ([(leg, chunk id, score)] best first per leg), each at
    PASSAGE_SEED_WEIGHT x its min-max normalised score within its leg.
    """
    g = load(conn)
    visible = filters.mask(g.columns)
    entity_nodes = g.named_entities(text, visible)
    seeds = {}
    for node in entity_nodes:
        chunks = g.document_chunks.get(node, [])
        seeds[node] = (1 - NAMED_DOCUMENT_SHARE) if chunks else 1.0
        for chunk in chunks:
            seeds[chunk] = seeds.get(chunk, 0.0) + NAMED_DOCUMENT_SHARE / len(chunks)
    by_leg = {}
    for leg, chunk_id, score in passages:
        top = by_leg.setdefault(leg, {})
        if len(top) < PASSAGE_SEEDS and chunk_id not in top:
            top[chunk_id] = score
    for top in by_leg.values():
        for chunk_id, value in _normalised(top).items():
            nodes, found = g.chunk_node(np.array([chunk_id], dtype=np.int64))
            if found.any():
                seeds[int(nodes[0])] = seeds.get(int(nodes[0]), 0.0) + PASSAGE_SEED_WEIGHT * value
    scores = g.chunk_scores(g.rank(seeds, visible))
    candidates = np.flatnonzero(visible & (scores > 0))
    order = candidates[np.lexsort((g.chunk_ids[candidates], -scores[candidates]))][:n]
    return [(int(g.chunk_ids[j]), float(scores[j])) for j in order], entity_nodes


def build(conn):
    """Read the whole graph from the brain on `conn`."""
    entity_ids = np.array([r[0] for r in conn.execute("select id from entities order by id")], dtype=np.int64)
    entity_index = {int(e): i for i, e in enumerate(entity_ids)}
    rows = conn.execute(
        f"select k.id, d.entity_id, {vec_metadata_values('k')} from knowledge k "
        "left join documents d on d.document_id = k.document_id order by k.id"
    ).fetchall()
    chunk_ids = np.array([r[0] for r in rows], dtype=np.int64)
    chunk_index = {int(c): j for j, c in enumerate(chunk_ids)}
    columns = {
        name: np.array([r[2 + i] for r in rows], dtype=np.int64 if kind == "integer" else str)
        for i, (name, (kind, _)) in enumerate(VEC_METADATA.items())
    }
    ties = []  # (a, b, type weight, owner chunk)
    E = len(entity_ids)
    document_chunks = {}
    for j, row in enumerate(rows):  # a chunk belongs to its document
        if row[1] is not None and row[1] in entity_index:
            ties.append((entity_index[row[1]], E + j, DOCUMENT_TIE_WEIGHT, j))
            document_chunks.setdefault(entity_index[row[1]], []).append(E + j)
    for a, b, relation, knowledge_id, document_id in conn.execute(
        "select from_entity_id, to_entity_id, relation_type, knowledge_id, document_id from relationships"
    ):
        if a not in entity_index or b not in entity_index:
            continue
        owner = chunk_index.get(knowledge_id, -1)
        type_weight = EDGE_TYPE_WEIGHTS.get(relation, DEFAULT_EDGE_WEIGHT)
        ties.append((entity_index[a], entity_index[b], type_weight, owner))
        if owner >= 0:  # the chunk that stated it is tied to both ends
            ties.append((entity_index[a], E + owner, type_weight, owner))
            ties.append((entity_index[b], E + owner, type_weight, owner))
    ties = np.array(ties, dtype=np.float64).reshape(-1, 4)
    a, b = ties[:, 0].astype(np.int64), ties[:, 1].astype(np.int64)
    source, target = np.concatenate([a, b]), np.concatenate([b, a])
    type_weight = np.concatenate([ties[:, 2], ties[:, 2]])
    owner = np.concatenate([ties[:, 3], ties[:, 3]]).astype(np.int64)
    n = E + len(chunk_ids)
    degree = np.bincount(source, minlength=n)
    weight = type_weight * np.minimum(1.0, PPR_THETA / np.maximum(degree[target], 1))
    chunk_document = np.full(len(chunk_ids), -1, dtype=np.int64)
    chunk_share = np.zeros(len(chunk_ids))
    for node, members in document_chunks.items():
        chunk_document[np.asarray(members) - E] = node
        chunk_share[np.asarray(members) - E] = 1.0 / len(members)
    names = conn.execute(mentions.ENTITY_NAMES).fetchall()
    return Graph(
        entity_ids, chunk_ids, source, target, weight, owner, columns,
        mentions.build_automaton(names), entity_index, document_chunks, chunk_document, chunk_share,
    )  # fmt: skip


CACHED_CONNECTIONS = 16
_cache = OrderedDict()  # id(conn) -> (conn, version, graph); holding conn keeps its id unique
_lock = threading.Lock()


def load(conn):
    """The graph of the brain on `conn`, rebuilt only when the file has changed
    (another connection's commit moves PRAGMA data_version, this one's moves
    total_changes). The most recently used connections keep theirs."""
    version = (conn.execute("pragma data_version").fetchone()[0], conn.total_changes)
    with _lock:
        cached = _cache.get(id(conn))
        if cached and cached[0] is conn and cached[1] == version:
            _cache.move_to_end(id(conn))
            return cached[2]
    graph = build(conn)
    with _lock:
        _cache[id(conn)] = (conn, version, graph)
        while len(_cache) > CACHED_CONNECTIONS:
            _cache.popitem(last=False)
    return graph


def named_entities(conn, text, filters):
    """The entity nodes `text` names that a caller with `filters` can reach."""
    g = load(conn)
    return g.named_entities(text, filters.mask(g.columns))
