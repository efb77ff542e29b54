"""The read state: what recall keeps in memory for one brain file — each chunk's
filter columns and int8 vector, the entity graph, the entity names — one copy per
file per process, shared by every connection and thread.

It follows writes instead of being rebuilt: triggers log which chunk, entity,
edge and document each write touched (brain_changes, in the writer's own
transaction), and a reader applies what was logged since its last look, re-reading
only those rows. A small write costs work in proportion to the write. A full build
happens at first use, when more changed than a rebuild would cost, or when the log
no longer reaches back far enough. SQLite stays the single source of truth:
everything here is rebuilt from it, and `fingerprint` compares a followed state
with a fresh build.
"""

import contextlib
import json
import os
import threading

import numpy as np

from . import mentions
from .config import DEFAULT_EDGE_WEIGHT, DOCUMENT_TIE_WEIGHT, EDGE_TYPE_WEIGHTS, MENTION_MIN_CHARS
from .connection import open_connection
from .schema import CHANGES_TABLE, INSTANCE_TABLE, fts_length
from .vectors import VEC_METADATA, vec_metadata_values

TEXT_COLUMNS = tuple(name for name, (kind, _) in VEC_METADATA.items() if kind == "text")
REBUILD_SHARE = 0.25  # apply the log while it names fewer rows than this share of the brain
PENDING_NAMES = 2000  # names matched by a second, small automaton until the main one is rebuilt
MIN_COMPACT_SLOTS = 1000  # a smaller state is never worth compacting


class _Slots:
    """Growable parallel numpy arrays, addressed by slot; a removed row's slot stays dead."""

    def __init__(self, columns, capacity=1024):
        self.size = 0
        self.arrays = {name: np.zeros((capacity, *shape), dtype=dtype) for name, (dtype, shape) in columns.items()}

    def add(self, count=1):
        """Slots for `count` new rows, growing the arrays geometrically."""
        start, end = self.size, self.size + count
        capacity = len(next(iter(self.arrays.values())))
        if end > capacity:
            capacity = max(end, 2 * capacity)
            for name, array in self.arrays.items():
                grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
                grown[: self.size] = array[: self.size]
                self.arrays[name] = grown
        self.size = end
        return np.arange(start, end)

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name][: self.size]
        raise AttributeError(name)


class ReadState:
    """The in-memory state of one brain. Read it under `lock` (shared); `refresh`
    takes it exclusively while it applies changes."""

    def __init__(self, dimension):
        self.lock = _SharedLock()
        self.seq = None  # the last change applied (None: the brain has no change log)
        self.last = None  # that change's (kind, key): a file copied over this one says otherwise
        self.instance = None  # the brain's own id (brain_instance), kept by copies of it
        self.built = False
        self.compacting = False  # a copy without dead slots is being built aside
        self.token = None  # without a change log: the file's state when built
        self.version = 0  # bumped by every change, for caches keyed on the state
        self.dimension = dimension
        self.codes = {name: {} for name in TEXT_COLUMNS}  # text filter values -> small integers
        self.chunks = _Slots(
            {"id": (np.int64, ()), "live": (np.bool_, ()), "node": (np.int64, ()), "doc_node": (np.int64, ()),
             "has_vector": (np.bool_, ()), "vec_chunk": (np.int64, ()), "vec_offset": (np.int64, ()),
             "sqnorm": (np.float64, ()), "inverse_norm": (np.float32, ()), "vector": (np.float32, (dimension,)),
             "length": (np.int64, ()),
             **{name: (np.int64, ()) for name in VEC_METADATA}}
        )  # fmt: skip
        self.chunk_slot = {}  # chunk id -> slot
        self.chunk_document = {}  # chunk id -> its document_id
        self.document_chunks = {}  # document_id -> {chunk ids}
        self.document_entity = {}  # document_id -> entity id
        self.entity_documents = {}  # entity id -> {document_ids}
        self.nodes = _Slots({"live": (np.bool_, ()), "chunk": (np.int64, ()), "entity": (np.int64, ())})
        self.entity_node = {}  # entity id -> node
        self.entities = {}  # entity id -> (name, entity_type)
        self.ties = _Slots({"a": (np.int64, ()), "b": (np.int64, ()), "weight": (np.float64, ()),
                            "owner": (np.int64, ()), "live": (np.bool_, ()), "mention": (np.bool_, ()),
                            "edge_a": (np.int64, ()), "edge_b": (np.int64, ())})  # fmt: skip
        self.edge_ties = {}  # relationship id -> tie slots
        self.edges = {}  # relationship id -> (from, to, type, knowledge id)
        self.chunk_edges = {}  # chunk id -> ids of the relationships it stated
        self.dangling = {}  # relationship id -> (from, to): an end is missing, so it is not walked
        self.document_tie = {}  # chunk id -> its tie to its document's entity
        self.aliases = {}  # entity id -> {relationship id: the entity it is an alias of}
        self.alias_edges = {}  # alias_of relationship id -> the entity it makes an alias
        self.named_by = {}  # casefolded name -> {entity ids with that name}
        self.automaton, self.pending, self.pending_ids = None, None, set()
        self.walks = {}  # (version, visibility) -> prepared walk
        self.walks_lock = threading.Lock()  # readers share the state, and all keep walks

    # -- reading ---------------------------------------------------------------

    def chunk_columns(self):
        """Each chunk slot's filter columns (text ones as codes; see `codes`)."""
        return {name: self.chunks.arrays[name][: self.chunks.size] for name in VEC_METADATA}

    def visible_chunks(self, filters):
        """Boolean mask over chunk slots: live chunks the filters admit."""
        return self.chunks.live & filters.mask(self.chunk_columns(), self.codes)

    def nearest(self, query, visible, n):
        """[(chunk id, cosine distance)] of the `n` visible chunks nearest to the int8
        vector `query` (bytes), nearest first, equal distances by id: what the vec0
        KNN returns. The distance is sqlite-vec's for int8 cosine, to the bit: its
        integer sums (exact here in float32, as there), then square roots and the
        division in double, rounded to float."""
        chunks = self.chunks
        q = np.frombuffer(query, dtype=np.int8)
        query_norm = float((q.astype(np.int64) ** 2).sum())
        searchable = visible & chunks.has_vector
        if not query_norm or not searchable.any():
            return []
        dots = chunks.vector @ q.astype(np.float32)
        # a float32 cosine finds the shortlist (the n best, and all within a margin
        # far wider than its rounding); the exact distance orders it
        cosine = np.where(searchable, dots * chunks.inverse_norm, -np.inf)
        if searchable.sum() > n:
            kth = np.partition(cosine, len(cosine) - n)[len(cosine) - n]
            candidates = np.flatnonzero(searchable & (cosine >= kth - 1e-4))
        else:
            candidates = np.flatnonzero(searchable)
        distance = (1.0 - dots[candidates] / (np.sqrt(chunks.sqnorm[candidates]) * np.sqrt(query_norm))).astype(np.float32)
        # which of equal distances make the cut is vec0's choice: it scans its chunks in
        # order, keeps what it has over an equal newcomer, and within a chunk takes the later row
        kept = np.lexsort((-chunks.vec_offset[candidates], chunks.vec_chunk[candidates], distance))[:n]
        candidates, distance = candidates[kept], distance[kept]
        ids = chunks.id[candidates]
        order = np.lexsort((ids, distance))
        return [(int(ids[i]), float(distance[i])) for i in order]

    def alias_target(self, entity_id, visible=None):
        """What a name resolves to: the entity it is an alias of (the first such
        edge a chunk in `visible` stated, when given), or itself."""
        targets = self.aliases.get(entity_id)
        if targets and visible is not None:
            targets = {edge: target for edge, target in targets.items() if self._stated_in(edge, visible)}
        return targets[min(targets)] if targets else entity_id

    def _stated_in(self, edge_id, visible):
        """Whether the relationship was stated by no chunk or by one in `visible`."""
        edge = self.edges.get(edge_id)
        if edge is None or edge[3] is None:
            return edge is not None
        knowledge_id = edge[3]
        slot = self.chunk_slot.get(knowledge_id)
        return slot is not None and bool(visible[slot])

    def seed_entities(self, text, reachable=None, visible=None):
        """Entity ids the text names: whole words, any case, longest match first,
        each name resolved through alias_of. Given `reachable` (entity id -> bool)
        and `visible` (a mask over chunk slots), only reachable entities stand for a
        name and only visible chunks' alias_of edges resolve one: a name known
        only from hidden memories changes nothing."""
        found = {}  # (start, end) -> entity ids whose name stands there
        for automaton in (self.automaton, self.pending):
            for start, end, entity_id in mentions.spans(automaton, text):
                if reachable is None or reachable(entity_id):
                    found.setdefault((start, end), set()).add(entity_id)
        taken, seeds = [], set()
        for start, end in sorted(found, key=lambda span: (-(span[1] - span[0]), span[0])):
            if any(start < e and s < end for s, e in taken):
                continue
            key = text.casefold()[start:end]
            current = [e for e in found[(start, end)] if e in self.named_by.get(key, ())]
            if not current:
                continue  # a name the automaton still holds but no entity has now
            taken.append((start, end))
            seeds.add(self.alias_target(min(current), visible))
        return sorted(seeds)

    # -- building and following ------------------------------------------------

    def build(self, conn):
        """Read everything from the brain on `conn` (a fresh state)."""
        seq, self.instance = _last_change(conn)
        entities = conn.execute("select id, name, entity_type from entities order by id").fetchall()
        self._put_entities(entities)
        rows = conn.execute(
            f"select k.id, k.document_id, {vec_metadata_values('k')}, d.sz from knowledge k "
            "left join knowledge_fts_docsize d on d.id = k.id order by k.id"
        ).fetchall()
        vectors = dict(conn.execute("select knowledge_id, embedding_int8 from vec_knowledge").fetchall())
        positions = _positions(conn)
        for document_id, entity_id in conn.execute("select document_id, entity_id from documents"):
            self._set_document(document_id, entity_id)
        self._put_chunks(rows, vectors, positions)
        self._put_edges(conn.execute(
            "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships order by id"
        ).fetchall())  # fmt: skip
        self._rebuild_automaton()
        self.seq, self.built = seq, True
        self.last = _entry(conn, seq) if seq else None
        self.version += 1
        return self

    def garbage(self):
        """The share of slots that removed rows left behind; past REBUILD_SHARE a
        rebuild compacts them (its cost is then in proportion to the writes)."""
        used = self.chunks.size + self.nodes.size + self.ties.size
        dead = (self.chunks.size - len(self.chunk_slot)) + int((~self.nodes.live).sum()) + int((~self.ties.live).sum())
        return dead / used if used > MIN_COMPACT_SLOTS else 0.0

    def refresh(self, conn):
        """Bring the state up to what `conn` sees; True when it must be built anew."""
        seq, instance = _last_change(conn)
        if instance != self.instance:
            return True  # another brain copied over this file
        if seq == self.seq:
            return False
        if seq is None or self.seq is None or seq < self.seq:
            return True  # no log, or another file at this path
        first = conn.execute(f"select min(seq) from {CHANGES_TABLE}").fetchone()[0]
        if first is None or first > self.seq + 1:
            return True  # the log no longer reaches back to us
        if self.seq and _entry(conn, self.seq) != self.last:
            return True  # another file now, whose log says other things
        changed = {}
        for kind, key in conn.execute(
            f"select kind, key from {CHANGES_TABLE} where seq > ? and seq <= ?", (self.seq, seq)
        ):
            changed.setdefault(kind, set()).add(key)
        if "all" in changed or sum(map(len, changed.values())) > REBUILD_SHARE * max(self.chunks.size + self.nodes.size, 1000):
            return True  # a repair says anything may have changed, or too much did
        self._apply(conn, changed)
        self.seq, self.last = seq, _entry(conn, seq)
        self.version += 1
        self.walks.clear()
        return False

    def _apply(self, conn, changed):
        """Re-read the rows the log names and replace what the state held for them."""
        arrived = set()
        if changed.get("entity"):
            ids = sorted(changed["entity"])
            rows = _rows_by_id(conn, "select id, name, entity_type from entities where id in ({})", ids)
            for entity_id in ids:
                if entity_id not in rows:
                    self._drop_entity(entity_id)
            arrived = {i for i in rows if i not in self.entity_node}
            self._put_entities([rows[i] for i in ids if i in rows])
        documents = set(changed.get("document", ()))
        if documents:
            found = dict(_rows_by_id(conn, "select document_id, entity_id from documents where document_id in ({})",
                                     sorted(documents)).values())  # fmt: skip
            for document_id in documents:
                self._set_document(document_id, found.get(document_id))
        for entity_id in arrived:  # an entity back under its id: its documents' chunks tie to it again
            documents |= self.entity_documents.get(entity_id, set())
        chunk_ids = set(changed.get("chunk", ()))
        for document_id in documents:  # a document's entity ties all its chunks
            chunk_ids |= self.document_chunks.get(document_id, set())
        if chunk_ids:
            ids = sorted(chunk_ids)
            rows = _rows_by_id(
                conn, f"select k.id, k.document_id, {vec_metadata_values('k')}, d.sz from knowledge k "
                "left join knowledge_fts_docsize d on d.id = k.id where k.id in ({})", ids
            )
            vectors = {}
            for knowledge_id in ids:
                row = conn.execute(
                    "select embedding_int8 from vec_knowledge where knowledge_id = ?", (knowledge_id,)
                ).fetchone()
                if row:
                    vectors[knowledge_id] = row[0]
            positions = _positions(conn, [i for i in ids if i in vectors])
            for knowledge_id in ids:
                self._drop_chunk(knowledge_id)
            self._put_chunks([rows[i] for i in ids if i in rows], vectors, positions)
        edge_ids = set(changed.get("edge", ()))
        if arrived:  # edges waiting for an end that is back
            edge_ids |= {e for e, (a, b) in self.dangling.items() if a in arrived or b in arrived}
        for knowledge_id in chunk_ids:  # a chunk written again has a new node: its edges follow
            edge_ids |= self.chunk_edges.get(knowledge_id, set())
        if edge_ids:
            ids = sorted(edge_ids)
            rows = _rows_by_id(
                conn, "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships "
                "where id in ({})", ids,
            )  # fmt: skip
            for edge_id in ids:
                self._drop_edge(edge_id)
            self._put_edges([rows[i] for i in ids if i in rows])
        if changed.get("entity") or self.pending_ids:
            self._refresh_automaton()

    def _set_document(self, document_id, entity_id):
        """Record the entity a document's chunks are tied to (None: the document is gone)."""
        old = self.document_entity.pop(document_id, None)
        if old is not None:
            self.entity_documents[old].discard(document_id)
            if not self.entity_documents[old]:
                del self.entity_documents[old]
        if entity_id is not None:
            self.document_entity[document_id] = entity_id
            self.entity_documents.setdefault(entity_id, set()).add(document_id)

    def _put_entities(self, rows):
        new = [row[0] for row in rows if row[0] not in self.entity_node]
        nodes = self.nodes.add(len(new))
        self.nodes.arrays["live"][nodes] = True
        self.nodes.arrays["chunk"][nodes] = -1
        self.nodes.arrays["entity"][nodes] = new
        self.entity_node.update(zip(new, nodes.tolist()))
        for entity_id, name, entity_type in rows:
            if entity_id in self.entities:
                self._forget_name(entity_id)
            self.entities[entity_id] = (name, entity_type)
            if (entity_type or "") != "tag" and len(name) >= MENTION_MIN_CHARS:
                for key in mentions.names_of(name):
                    self.named_by.setdefault(key, set()).add(entity_id)
                self.pending_ids.add(entity_id)

    def _forget_name(self, entity_id):
        old = self.entities.pop(entity_id, None)
        if old:
            for key in mentions.names_of(old[0]):
                holders = self.named_by.get(key)
                if holders:
                    holders.discard(entity_id)
                    if not holders:
                        del self.named_by[key]

    def _drop_entity(self, entity_id):
        """An entity gone (only plain SQL removes one): its node, and every edge to it,
        as a fresh build would skip them."""
        self._forget_name(entity_id)
        node = self.entity_node.pop(entity_id, None)
        if node is not None:
            self.nodes.arrays["live"][node] = False
        for edge_id in [e for e, (a, b, _, _) in self.edges.items() if entity_id in (a, b)]:
            a, b, _, _ = self._drop_edge(edge_id, aliases=False)  # its row is still there, and still names an alias
            self.dangling[edge_id] = (a, b)

    def _put_chunks(self, rows, vectors, positions):
        """Chunks (knowledge rows with their filter columns and FTS5 sizes), their int8 vectors
        ({id: blob}) and where vec0 stores them ({id: (chunk, offset)})."""
        slots = self.chunks.add(len(rows))
        nodes = self.nodes.add(len(rows))
        arrays = self.chunks.arrays
        columns = list(zip(*rows)) or [()] * (3 + len(VEC_METADATA))
        ids = list(columns[0])
        arrays["id"][slots] = ids
        arrays["length"][slots] = [fts_length(size) for size in columns[2 + len(VEC_METADATA)]]
        arrays["live"][slots] = True
        arrays["node"][slots] = nodes
        arrays["doc_node"][slots] = -1
        self.nodes.arrays["live"][nodes] = True
        self.nodes.arrays["chunk"][nodes] = slots
        self.nodes.arrays["entity"][nodes] = -1
        for i, name in enumerate(VEC_METADATA):
            values = columns[2 + i]
            if name in TEXT_COLUMNS:
                codes = self.codes[name]
                values = [codes[v] if v in codes else codes.setdefault(v, len(codes)) for v in values]
            arrays[name][slots] = values
        with_vector = [(slot, vectors[i]) for slot, i in zip(slots.tolist(), ids) if i in vectors]
        if with_vector:
            where = np.array([slot for slot, _ in with_vector])
            matrix = np.frombuffer(b"".join(blob for _, blob in with_vector), dtype=np.int8).reshape(len(where), -1)
            arrays["vector"][where] = matrix
            arrays["has_vector"][where] = True
            written = arrays["vector"][where]
            # sums of squares of int8 values: whole numbers, exact in float32 at these sizes
            arrays["sqnorm"][where] = np.einsum("ij,ij->i", written, written)
            arrays["inverse_norm"][where] = 1.0 / np.sqrt(arrays["sqnorm"][where])
            placed = [positions.get(i, (0, i)) for i in ids if i in vectors]
            arrays["vec_chunk"][where] = [chunk for chunk, _ in placed]
            arrays["vec_offset"][where] = [offset for _, offset in placed]
        self.chunk_slot.update(zip(ids, slots.tolist()))
        ties = []
        document_entity, entity_node = self.document_entity, self.entity_node
        for knowledge_id, node, document_id in zip(ids, nodes.tolist(), columns[1]):
            if document_id is not None:
                self.chunk_document[knowledge_id] = document_id
                self.document_chunks.setdefault(document_id, set()).add(knowledge_id)
                entity = entity_node.get(document_entity.get(document_id))
                if entity is not None:
                    ties.append((knowledge_id, entity, node))
        tie_slots = self._add_ties([(a, b, DOCUMENT_TIE_WEIGHT, b, False, -1, -1) for _, a, b in ties])
        for (knowledge_id, entity_node, _), tie in zip(ties, tie_slots):
            self.document_tie[knowledge_id] = int(tie)
            arrays["doc_node"][self.chunk_slot[knowledge_id]] = entity_node

    def _drop_chunk(self, knowledge_id):
        slot = self.chunk_slot.pop(knowledge_id, None)
        if slot is None:
            return
        self.chunks.arrays["live"][slot] = False
        self.nodes.arrays["live"][self.chunks.arrays["node"][slot]] = False
        document_id = self.chunk_document.pop(knowledge_id, None)
        if document_id is not None:
            members = self.document_chunks.get(document_id)
            members.discard(knowledge_id)
            if not members:
                del self.document_chunks[document_id]
        tie = self.document_tie.pop(knowledge_id, None)
        if tie is not None:
            self.ties.arrays["live"][tie] = False

    def _put_edges(self, rows):
        """Relationships as ties: between their entities and, when a chunk stated
        one, from each end to that chunk; the chunk's visibility gates all three."""
        ties, owners = [], []
        for edge_id, a, b, relation, knowledge_id in rows:
            if relation == "alias_of":
                self.aliases.setdefault(a, {})[edge_id] = b
                self.alias_edges[edge_id] = a
                self.pending_ids.add(a)
            if a not in self.entity_node or b not in self.entity_node:
                self.dangling[edge_id] = (a, b)  # `brain check` reports it; walked once both ends exist
                continue
            self.dangling.pop(edge_id, None)
            self.edges[edge_id] = (a, b, relation, knowledge_id)
            if knowledge_id is not None:
                self.chunk_edges.setdefault(knowledge_id, set()).add(edge_id)
            slot = self.chunk_slot.get(knowledge_id)
            owner = int(self.chunks.arrays["node"][slot]) if slot is not None else -1
            weight = EDGE_TYPE_WEIGHTS.get(relation, DEFAULT_EDGE_WEIGHT)
            na, nb = self.entity_node[a], self.entity_node[b]
            edge = (owner, relation == mentions.MENTIONS, na, nb)  # each tie knows the relationship's ends
            mine = [(na, nb, weight, *edge)]
            if owner >= 0:
                mine += [(na, owner, weight, *edge), (nb, owner, weight, *edge)]
            ties += mine
            owners.append((edge_id, len(mine)))
        slots = iter(self._add_ties(ties))
        for edge_id, count in owners:
            self.edge_ties[edge_id] = [int(next(slots)) for _ in range(count)]

    def _drop_edge(self, edge_id, aliases=True):
        if aliases:  # the row itself is gone
            self.dangling.pop(edge_id, None)
        edge = self.edges.pop(edge_id, None)
        if edge and edge[3] is not None:
            stated = self.chunk_edges[edge[3]]
            stated.discard(edge_id)
            if not stated:
                del self.chunk_edges[edge[3]]
        for tie in self.edge_ties.pop(edge_id, []):
            self.ties.arrays["live"][tie] = False
        source = self.alias_edges.pop(edge_id, None) if aliases else None
        if source is not None:
            targets = self.aliases[source]
            del targets[edge_id]
            self.pending_ids.add(source)
            if not targets:
                del self.aliases[source]
        return edge

    def _add_ties(self, ties):
        slots = self.ties.add(len(ties))
        if ties:
            arrays = self.ties.arrays
            for name, column in zip(("a", "b", "weight", "owner", "mention", "edge_a", "edge_b"), zip(*ties)):
                arrays[name][slots] = column
            arrays["live"][slots] = True
        return slots

    def _rebuild_automaton(self):
        self.automaton = mentions.automaton_of(
            {key: sorted(holders) if len(holders) > 1 else list(holders) for key, holders in self.named_by.items()}
        )
        self.pending, self.pending_ids = None, set()

    def _refresh_automaton(self):
        """New names go to a small second automaton; past PENDING_NAMES the main one
        is rebuilt, so each name costs a constant share of a rebuild."""
        if len(self.pending_ids) > PENDING_NAMES:
            self._rebuild_automaton()
            return
        pending = {}
        for entity_id in sorted(self.pending_ids):
            if entity_id in self.entities:
                for key in mentions.names_of(self.entities[entity_id][0]):
                    if entity_id in self.named_by.get(key, ()):
                        pending.setdefault(key, []).append(entity_id)
        self.pending = mentions.automaton_of(pending)

    def fingerprint(self):
        """What the state holds, independent of slot order: equal for a followed
        state and a fresh build of the same brain. Takes the shared lock itself."""
        with self.lock:
            return self._fingerprint()

    def _fingerprint(self):
        chunks = self.chunks
        live = np.flatnonzero(chunks.live)
        decode = {name: {code: value for value, code in self.codes[name].items()} for name in TEXT_COLUMNS}
        node_entity, node_chunk = self.nodes.entity, self.nodes.chunk

        def name(node):
            return ("entity", int(node_entity[node])) if node_entity[node] >= 0 else ("chunk", int(chunks.id[node_chunk[node]]))

        columns = {
            int(chunks.id[s]): tuple(decode[c][chunks.arrays[c][s]] if c in decode else int(chunks.arrays[c][s]) for c in VEC_METADATA)
            + (int(chunks.length[s]),)
            for s in live
        }  # fmt: skip
        vectors = {int(chunks.id[s]): chunks.vector[s].astype(np.int8).tobytes() for s in live if chunks.has_vector[s]}
        ties = sorted(
            (tuple(sorted((name(a), name(b)))), float(w), name(o) if o >= 0 else ("none", 0))
            for a, b, w, o, alive in zip(self.ties.a, self.ties.b, self.ties.weight, self.ties.owner, self.ties.live)
            if alive and self.nodes.live[a] and self.nodes.live[b]
        )  # fmt: skip
        names = {key: sorted(holders) for key, holders in self.named_by.items()}
        targets = {entity_id: self.alias_target(entity_id) for entity_id in self.entities}
        return {"columns": columns, "vectors": vectors, "ties": ties, "names": names, "targets": targets,
                "entities": sorted(self.entity_node)}  # fmt: skip


def _positions(conn, ids=None):
    """{knowledge id: (vec0 chunk, offset in it)} — where vec0 stores each vector, which
    decides which of equal distances its KNN keeps. Read from its rowids table; if a
    sqlite-vec version lays that out otherwise, ids stand in (the append order)."""
    sql = "select rowid, chunk_id, chunk_offset from vec_knowledge_rowids"
    try:
        if ids is None:
            rows = conn.execute(sql).fetchall()
        else:
            rows = conn.execute(f"{sql} where rowid in (select value from json_each(?))", [json.dumps(ids)]).fetchall()
    except Exception:  # noqa: BLE001 - another layout: fall back as documented
        return {}
    return {row[0]: (row[1], row[2]) for row in rows}


def _rows_by_id(conn, sql, ids):
    """{first column: row} for rows whose key is among `ids`, read in one query."""
    rows = conn.execute(sql.format("select value from json_each(?)"), [json.dumps(ids)]).fetchall()
    return {row[0]: tuple(row) for row in rows}


def _entry(conn, seq):
    row = conn.execute(f"select kind, key from {CHANGES_TABLE} where seq = ?", (seq,)).fetchone()
    return tuple(row) if row else None


def _last_change(conn):
    """(the last change's seq, the brain's instance id); seq None for a brain from
    before the change log, which cannot be followed."""
    try:
        return tuple(conn.execute(
            f"select (select coalesce(max(seq), 0) from {CHANGES_TABLE}), "
            f"(select instance from {INSTANCE_TABLE})"
        ).fetchone())  # fmt: skip
    except Exception:  # noqa: BLE001 - no change log (or no instance yet): not followable
        return None, None


class _SharedLock:
    """Many readers, or one writer (a refresh); a waiting writer goes before the
    readers who come after it, so refreshes are never starved."""

    def __init__(self):
        self._condition = threading.Condition()
        self._readers = 0
        self._writers = 0  # waiting or writing

    def __enter__(self):
        with self._condition:
            self._condition.wait_for(lambda: not self._writers)
            self._readers += 1

    def __exit__(self, *exc):
        with self._condition:
            self._readers -= 1
            self._condition.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._condition:
            self._writers += 1
            try:
                self._condition.wait_for(lambda: not self._readers)
                yield
            finally:
                self._writers -= 1
                self._condition.notify_all()


_states = {}
_states_lock = threading.Lock()


def _file_key(conn):
    """The brain file behind `conn` (its path and inode), or None for an in-memory one."""
    path = next((row[2] for row in conn.execute("pragma database_list") if row[1] == "main"), "")
    if not path:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), stat.st_dev, stat.st_ino)


def _file_token(path):
    """What changes when a file without a change log is written: its and its WAL's size and time."""
    token = []
    for name in (path, path + "-wal"):
        try:
            stat = os.stat(name)
            token.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            token.append(None)
    return tuple(token)


def current(conn, dimension):
    """The read state of the brain on `conn`, up to date with what `conn` sees.
    Use it under its shared lock: `with state.lock: ...`."""
    key = _file_key(conn)
    with _states_lock:
        state = _states.get(key) if key else None
        if state is None or state.dimension != dimension:
            state = ReadState(dimension)
            if key:
                _states[key] = state
    if conn.in_transaction:
        # what this connection sees may never be committed (and a rolled-back
        # change log reuses its numbers): it must not reach the shared state
        return state if state.built else ReadState(dimension).build(conn)
    seq, instance = _last_change(conn)
    token = _file_token(key[0]) if key and seq is None else None
    if state.built and seq is not None and (seq, instance) == (state.seq, state.instance):
        return state  # the common case: nothing written since
    compact = False
    with state.lock.exclusive():
        if state.built and seq is None and token == state.token:
            return state
        try:
            stale = not state.built or seq is None or state.refresh(conn)
        except BaseException:
            state.built = False  # half applied: the next reader builds it anew
            raise
        if stale:
            _replace(state, ReadState(dimension).build(conn), token)
        elif state.garbage() > REBUILD_SHARE and not state.compacting:
            # current, but full of dead slots: a copy without them is built aside,
            # while readers go on with this one
            state.compacting = compact = bool(key)
    if compact:
        threading.Thread(target=_compact, args=(state, key[0], dimension), name="brain-compact", daemon=True).start()
    return state


def _replace(state, fresh, token):
    """Put `fresh` in place of what `state` holds (under its exclusive lock)."""
    fresh.version, fresh.token = state.version + 1, token
    state.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "lock"})


def _compact(state, path, dimension):
    """Build `state` anew on a connection of its own while readers go on; then, under
    the lock, bring the copy up to the writes made meanwhile and swap it in."""
    try:
        conn = open_connection(path, read_only=True)
        try:
            fresh = ReadState(dimension).build(conn)
            with state.lock.exclusive():
                if state.built and fresh.instance == state.instance and not fresh.refresh(conn):
                    _replace(state, fresh, state.token)
        finally:
            conn.close()
    finally:
        with state.lock.exclusive():
            state.compacting = False
