"""The read state's entity graph: entities and chunks as nodes, relationships and
document membership as weighted ties, the names a query can name them by, and
the walk the graph leg takes over them.

Nodes are entities and chunks. A chunk is tied to its document's entity; a
relationship ties its two entities and, when a chunk stated it, each end to that
chunk, so the chunk's visibility gates all three. Ties are weighted by the
relation (tagged_with, alias_of 0.1; others 1.0) and damped at hubs by
w * min(1, θ / deg), θ = 50, the degree counted over what the caller may see.

The walk is local: Personalized PageRank's power iteration run over the nodes
the seeds reach, each node's ties read from an adjacency index when its score
first moves, so a walk costs what the seeds' neighbourhood costs, whatever the
size of the brain, and no matrix is rebuilt when a write lands. Scores below
PPR_PRUNE are not spread further: far below what the ranking can tell apart.

Names are found as the ingest's mentions find them (whole words, any case,
longest first, mentions.names_of forms) through a hash index of the names'
casefolded keys: a dictionary of a million names is a few arrays, not a trie.
"""

import bisect
import functools
import unicodedata

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it on first use: with this module, not in a recall)
import xxhash

from . import mentions
from .config import (
    DEFAULT_EDGE_WEIGHT,
    DOCUMENT_TIE_WEIGHT,
    EDGE_TYPE_WEIGHTS,
    MENTION_MIN_CHARS,
    PPR_DAMPING,
    PPR_THETA,
)
from .slots import IdMap, Slots, StringIndex, Strings, distinct, distinct_counts, gather

MAX_ITERATIONS = 20
TOLERANCE = 1e-6
PPR_PRUNE = 1e-10  # a node whose score is below this spreads nothing
MAX_WALKED_NODES = 500_000  # a walk never reads more of the graph than this
REINDEX_SHARE = 0.05  # ties added since the adjacency index was built, past this share of it, rebuild it
REINDEX_MIN = 20_000
NAMES_MERGE = 50_000  # names added since the name index's sorted part was built, past this, merge them in
WALKED, DANGLING = 1, 2  # a relationship's status: walked, or waiting for a missing end


def _key_hash(key):
    return xxhash.xxh64_intdigest(key.encode("utf-8", "surrogatepass"))


_LONG = (1 << 21) - 1  # a key's length in its shape (longer ones share it)


@functools.cache
def _several_letters():
    """The letters str.casefold writes as several ("ß" as "ss"): all below U+FB18."""
    return np.array([c for c in range(0x10000) if not 0xD800 <= c < 0xE000 and len(chr(c).casefold()) != 1])


def _shape(first, last, length):
    """A key's first and last characters and its length, in one int."""
    return (min(length, _LONG) << 42) | (ord(first) << 21) | ord(last)


def _word(character):
    """Whether `character` is part of a word: a letter, digit or "_", or a mark on one
    ("İzmir" casefolds to an i and a combining dot), not a variation selector ("Orion"
    and an emoji's selector)."""
    if character.isalnum() or character == "_":
        return True
    return unicodedata.category(character).startswith("M") and not "\ufe00" <= character <= "\ufe0f"


class NameIndex:
    """Casefolded name keys -> entity ids, by a 64-bit hash of the key: a sorted
    part plus the names added since. An entry may be stale (the entity renamed or
    gone): callers check a candidate's current name."""

    def __init__(self):
        self.hashes = np.zeros(0, dtype=np.uint64)
        self.entities = np.zeros(0, dtype=np.int64)
        self.recent = {}  # hash -> [entity ids]
        self.lengths = set()  # lengths of the keys held
        # the keys' shapes (_shape) and first characters: a span of a text that is no key's
        # shape is not looked up (a text of punctuation is a span at every pair of places);
        # None in a snapshot saved before they were kept (EntityGraph makes them)
        self.shapes, self.firsts = set(), set()
        self.added = 0

    def add(self, entity_id, keys):
        for key in keys:
            self.recent.setdefault(_key_hash(key), []).append(entity_id)
            self.lengths.add(len(key))
            if self.shapes is not None:  # else made from every name when first wanted
                self.shapes.add(_shape(key[0], key[-1], len(key)))
                self.firsts.add(key[0])
            self.added += 1

    def merge(self):
        if not self.recent:
            return
        extra = [(h, e) for h, ids in self.recent.items() for e in ids]
        hashes = np.concatenate([self.hashes, np.array([h for h, _ in extra], dtype=np.uint64)])
        entities = np.concatenate([self.entities, np.array([e for _, e in extra], dtype=np.int64)])
        order = np.lexsort((entities, hashes))
        self.hashes, self.entities = hashes[order], entities[order]
        self.recent, self.added = {}, 0

    def candidates(self, key):
        h = _key_hash(key)
        low, high = (
            np.searchsorted(self.hashes, np.uint64(h), "left"),
            np.searchsorted(self.hashes, np.uint64(h), "right"),
        )
        found = self.entities[low:high].tolist()
        return found + self.recent.get(h, [])

    def to_arrays(self):
        self.merge()
        return {
            "names.hashes": self.hashes,
            "names.entities": self.entities,
            "names.lengths": np.array(sorted(self.lengths), dtype=np.int64),
            **({} if self.shapes is None else {"names.shapes": np.array(sorted(self.shapes), dtype=np.uint64)}),
        }

    def load(self, arrays):
        self.hashes, self.entities = arrays["names.hashes"].copy(), arrays["names.entities"].copy()
        self.lengths = set(arrays["names.lengths"].tolist())
        shapes = arrays.get("names.shapes")
        self.shapes = None if shapes is None else set(shapes.tolist())
        self.firsts = None if shapes is None else {chr((shape >> 21) & 0x1FFFFF) for shape in self.shapes}


class EntityGraph:
    """Nodes, ties, relationships, documents and names of one brain."""

    def __init__(self):
        self.nodes = Slots(
            {"live": (np.bool_, ()), "chunk": (np.int64, ()), "entity": (np.int64, ()), "tag": (np.bool_, ())}
        )
        self.node_names = Strings()  # by node: the entity's name (None for a chunk)
        self.entity_types = Strings()  # by node: the entity's type
        self.node_of_entity = IdMap()
        self.names = NameIndex()
        # per chunk slot, beside the chunk index's: its node, document and tie to its document's entity
        self.chunks = Slots(
            {"node": (np.int64, ()), "document": (np.int64, ()), "doc_tie": (np.int64, ()), "id": (np.int64, ())}
        )
        self.document_ids = Strings()  # index -> document_id
        # document_id -> index (None after a load of a snapshot saved without it: made on first use)
        self._document_index = StringIndex(self.document_ids)
        self.documents = Slots({"entity": (np.int64, ())})  # by index: its entity id, -1 for none
        self.ties = Slots(
            {
                "a": (np.int64, ()),
                "b": (np.int64, ()),
                "weight": (np.float64, ()),
                "owner": (np.int64, ()),
                "live": (np.bool_, ()),
                "mention": (np.bool_, ()),
                "edge_a": (np.int64, ()),
                "edge_b": (np.int64, ()),
            }
        )
        # relationships by id: their ends, relation, the chunk that stated them, their ties
        self.edge_row = IdMap()
        self.edges = Slots(
            {
                "id": (np.int64, ()),
                "a": (np.int64, ()),
                "b": (np.int64, ()),
                "kind": (np.int64, ()),
                "chunk": (np.int64, ()),
                "tie": (np.int64, ()),
                "ties": (np.int64, ()),
                "status": (np.int64, ()),
            }
        )
        self.relations = {}  # relation type -> code
        self.aliases = {}  # entity id -> {relationship id: the entity it is an alias of}
        self.alias_edges = {}  # alias_of relationship id -> the entity it makes an alias
        self.adjacency = None  # (pointers, ties, sides) over nodes and ties indexed; see index_ties
        self.recent_ties = {}  # node -> [(tie, side)] added since

    # -- entities and names --------------------------------------------------------

    def entity_node(self, entity_id):
        return self.node_of_entity.get(entity_id)

    def entity_ids(self):
        return self.node_of_entity.keys()

    def put_entities(self, rows):
        """(id, name, type) rows: new entities get nodes, known ones new names."""
        new = [row[0] for row in rows if row[0] not in self.node_of_entity]
        nodes = self.nodes.add(len(new))
        self.nodes.arrays["live"][nodes] = True
        self.nodes.arrays["chunk"][nodes] = -1
        self.nodes.arrays["entity"][nodes] = new
        self.node_names.extend([None] * len(new))
        self.entity_types.extend([None] * len(new))
        self.node_of_entity.set(new, nodes)
        for entity_id, name, entity_type in rows:
            node = self.node_of_entity[entity_id]
            self.node_names[node], self.entity_types[node] = name, entity_type
            tag = (entity_type or "") == "tag"
            self.nodes.arrays["tag"][node] = tag
            if not tag and len(name) >= MENTION_MIN_CHARS:
                self.names.add(entity_id, mentions.names_of(name))
        if self.names.added > NAMES_MERGE:
            self.names.merge()

    def drop_entity(self, entity_id):
        """An entity gone (only plain SQL removes one): its node, and its edges
        left waiting for it, as a fresh build would leave them."""
        node = self.node_of_entity.pop(entity_id)
        if node is not None:
            self.nodes.arrays["live"][node] = False
            self.node_names[node] = None
        edges = self.edges
        touching = np.flatnonzero((edges.status == WALKED) & ((edges.a == entity_id) | (edges.b == entity_id)))
        for row in touching.tolist():
            self._drop_edge_row(row, aliases=False)  # its row is still there, and still names an alias
            edges.arrays["status"][row] = DANGLING

    def named(self, key):
        """The live, nameable entity ids a casefolded `key` names now."""
        found = []
        for entity_id in self.names.candidates(key):
            node = self.node_of_entity[entity_id]
            if node < 0 or self.nodes.arrays["tag"][node] or entity_id in found:
                continue
            name = self.node_names[node]
            if name is not None and len(name) >= MENTION_MIN_CHARS and key in mentions.names_of(name):
                found.append(entity_id)
        return sorted(found)

    def alias_target(self, entity_id, visible=None):
        """What a name resolves to: the entity it is an alias of (the first such
        edge a chunk in `visible` stated, when given), or itself."""
        targets = self.aliases.get(entity_id)
        if targets and visible is not None:
            targets = {edge: target for edge, target in targets.items() if self._stated_in(edge, visible)}
        return targets[min(targets)] if targets else entity_id

    def _stated_in(self, edge_id, visible):
        """Whether the relationship is walked and was stated by no chunk or by one in `visible`."""
        row = self.edge_row[edge_id]
        if row < 0 or self.edges.arrays["status"][row] != WALKED:
            return False
        chunk = self.edges.arrays["chunk"][row]
        if chunk < 0:
            return True
        slot = self._chunk_slot(chunk)
        return slot is not None and bool(visible[slot])

    def seed_entities(self, text, reachable=None, visible=None):
        """Entity ids the text names (seed_spans'), sorted."""
        return sorted({entity for _, entity, _ in self.seed_spans(text, reachable, visible)})

    def seed_spans(self, text, reachable=None, visible=None):
        """[(the casefolded words, the entity id they name, whether only by a bare
        word)] of the spans of `text` that name an entity: whole words, any case,
        longest match first, never overlapping, each name resolved through alias_of.
        A bare word is one word that each entity it names writes only before a
        disambiguator ("maria" of "Maria (Counting Crows)"): the brain itself says
        it needs more to tell whom it means. Given `reachable` (entity id -> bool)
        and `visible` (a mask over chunk slots), only reachable entities stand for
        a name and only visible chunks' alias_of edges resolve one: a name known
        only from hidden memories changes nothing."""
        folded = text.casefold()
        shapes, firsts = self._name_shapes()
        starts = [p for p in range(len(folded)) if (p == 0 or not _word(folded[p - 1])) and folded[p] in firsts]
        ends = [q for q in range(1, len(folded) + 1) if q == len(folded) or not _word(folded[q])]
        longest = max(self.names.lengths, default=0)
        found = {}  # (start, end) -> entity ids whose name stands there
        for start in starts:
            first = folded[start]
            for end in ends[bisect.bisect_left(ends, start + MENTION_MIN_CHARS) :]:
                if end - start > longest:
                    break
                if _shape(first, folded[end - 1], end - start) not in shapes:
                    continue
                ids = [e for e in self.named(folded[start:end]) if reachable is None or reachable(e)]
                if ids:
                    found[(start, end)] = ids
        taken, spans = [], []
        for start, end in sorted(found, key=lambda span: (-(span[1] - span[0]), span[0])):
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            words, ids = folded[start:end], found[(start, end)]
            bare = all(map(_word, words)) and all(self._name_of(e).casefold() != words for e in ids)
            spans.append((words, self.alias_target(min(ids), visible), bare))
        return spans

    def _name_shapes(self):
        """The name keys' shapes and first characters (NameIndex), made from the
        entities' names when a snapshot saved before they were kept held none."""
        names = self.names
        if names.shapes is None:
            names.shapes, names.firsts = self._every_shape()
        return names.shapes, names.firsts

    def _every_shape(self):
        """(shapes, first characters) of every live entity's name keys: the names as the
        snapshot keeps them read in bulk, only their first and last letters casefolded (a
        million in a fraction of a second, where one at a time took seconds); the rest
        (changed or added since, titled with a disambiguator, or holding a letter that
        casefolds to several) one at a time."""
        nodes, column = self.nodes, self.node_names
        named = np.flatnonzero(nodes.live & (nodes.entity >= 0) & (nodes.tag == 0))
        stored = len(column.ends)
        bulk = named[named < stored]
        bulk = bulk[~column.none[bulk] & ~np.isin(bulk, np.fromiter(column.changed, np.int64, len(column.changed)))]
        codes = np.frombuffer(column.text.encode("utf-32-le", "surrogatepass"), np.uint32)
        starts = np.concatenate(([0], column.ends[:-1]))[bulk].astype(np.int64)
        ends = column.ends[bulk].astype(np.int64)
        bulk, starts, ends = (a[ends - starts >= MENTION_MIN_CHARS] for a in (bulk, starts, ends))
        several = np.flatnonzero(np.isin(codes, _several_letters()))  # a name holding one is longer folded
        alone = np.isin(bulk, np.searchsorted(column.ends, several, side="right")) | (codes[ends - 1] == ord(")"))
        first, last = codes[starts[~alone]], codes[ends[~alone] - 1]
        letters = np.unique(np.concatenate((first, last)))
        folded = np.array([ord(chr(c).casefold()) for c in letters.tolist()], dtype=np.int64)
        first, last = folded[np.searchsorted(letters, first)], folded[np.searchsorted(letters, last)]
        length = np.minimum(ends - starts, _LONG)[~alone]
        shapes = set(np.unique((length << 42) | (first << 21) | last).tolist())
        firsts = {chr(c) for c in np.unique(first).tolist()}
        eligible = np.zeros(nodes.size, dtype=bool)
        eligible[named] = True
        for node in [*bulk[alone].tolist(), *named[named >= stored].tolist(), *column.changed]:
            name = column[node]
            if eligible[node] and name is not None and len(name) >= MENTION_MIN_CHARS:
                for key in mentions.names_of(name):
                    shapes.add(_shape(key[0], key[-1], len(key)))
                    firsts.add(key[0])
        return shapes, firsts

    def _name_of(self, entity_id):
        """The entity's name ('' when it has none)."""
        return self.node_names[self.node_of_entity[entity_id]] or ""

    # -- documents and chunks ------------------------------------------------------

    @property
    def document_index(self):
        """document_id -> index (a StringIndex): a snapshot holds it, or one saved before
        it did is made on first use (only a refresh uses it: follower.fetch makes it
        beside the readers)."""
        if self._document_index is None:
            self._document_index = StringIndex.of(self.document_ids)
        return self._document_index

    def set_documents(self, pairs):
        """The entity each document's chunks are tied to, of (document_id, entity_id) pairs
        (None: the document is gone), their indexes looked up at once."""
        pairs = list(pairs)
        for (document_id, entity_id), index in zip(pairs, self.document_index.many([d for d, _ in pairs])):
            if index < 0:
                if entity_id is None:
                    continue
                index = self.document_index.added.get(document_id, -1)  # given twice among the pairs
                if index < 0:
                    index = self.document_index[document_id] = int(self.documents.add(1)[0])
                    self.document_ids.append(document_id)
            self.documents.arrays["entity"][index] = -1 if entity_id is None else entity_id

    def documents_of_entities(self, entity_ids):
        """document_ids of the documents whose entity is among `entity_ids`."""
        held = np.flatnonzero(np.isin(self.documents.entity, np.asarray(sorted(entity_ids), dtype=np.int64)))
        return {self.document_ids[i] for i in held.tolist()}

    def chunks_of_documents(self, document_ids):
        """Knowledge ids of the live chunks of `document_ids`."""
        indexes = [i for i in self.document_index.many(list(document_ids)) if i >= 0]
        if not indexes:
            return set()
        held = np.isin(self.chunks.document, np.array(indexes)) & (self.chunks.node >= 0)
        return set(self.chunks.id[held].tolist())

    def add_chunks(self, slots, ids, document_ids):
        """Nodes for the chunk index's new `slots` (chunks `ids` of `document_ids`),
        each tied to its document's entity."""
        mine = self.chunks.add(len(slots))
        assert np.array_equal(mine, slots), "the graph's chunks keep step with the chunk index's"
        nodes = self.nodes.add(len(slots))
        self.node_names.extend([None] * len(slots))
        self.entity_types.extend([None] * len(slots))
        arrays = self.nodes.arrays
        arrays["live"][nodes], arrays["chunk"][nodes], arrays["entity"][nodes] = True, slots, -1
        columns = self.chunks.arrays
        columns["node"][slots], columns["id"][slots], columns["doc_tie"][slots] = nodes, ids, -1
        documents = np.array(
            [i if d is not None else -1 for d, i in zip(document_ids, self.document_index.many(document_ids))],
            dtype=np.int64,
        )
        columns["document"][slots] = documents
        entities = gather(self.documents.arrays["entity"], documents, -1)
        ties = []
        for slot, node, document, entity in zip(slots.tolist(), nodes.tolist(), documents.tolist(), entities.tolist()):
            target = self.node_of_entity[entity] if document >= 0 and entity >= 0 else -1
            if target >= 0:
                # the chunk owns the tie: its visibility gates it
                ties.append((slot, (target, node, DOCUMENT_TIE_WEIGHT, node, False, -1, -1)))
        tie_slots = self._add_ties([tie for _, tie in ties])
        if ties:
            columns["doc_tie"][np.array([slot for slot, _ in ties])] = tie_slots

    def drop_chunks(self, slots):
        """Retire chunk slots: their nodes and ties to their documents."""
        if not len(slots):
            return
        columns = self.chunks.arrays
        self.nodes.arrays["live"][columns["node"][slots]] = False
        ties = columns["doc_tie"][slots]
        self.ties.arrays["live"][ties[ties >= 0]] = False
        columns["node"][slots] = -1

    def _chunk_slot(self, knowledge_id):
        """The live slot of a chunk id, through the chunk index's map (set by the state)."""
        return self.slot_of.get(knowledge_id)

    def doc_nodes(self, slots):
        """The node of each chunk slot's document's entity, -1 for none."""
        documents = self.chunks.document[slots]
        entities = gather(self.documents.entity, documents, -1)
        nodes = self.node_of_entity.many(entities)
        return np.where(entities >= 0, nodes, -1)

    # -- relationships -------------------------------------------------------------

    def put_edges(self, rows):
        """Relationships (id, from, to, relation, knowledge id) as ties: between their
        entities and, when a chunk stated one, from each end to that chunk."""
        ties, owners = [], []
        for edge_id, a, b, relation, knowledge_id in rows:
            row = self.edge_row[edge_id]
            if row < 0:
                row = int(self.edges.add(1)[0])
                self.edge_row.set([edge_id], [row])
            kind = self.relations.setdefault(relation, len(self.relations))
            columns = self.edges.arrays
            columns["id"][row], columns["a"][row], columns["b"][row], columns["kind"][row] = edge_id, a, b, kind
            columns["chunk"][row] = -1 if knowledge_id is None else knowledge_id
            columns["ties"][row] = 0
            if relation == "alias_of":
                self.aliases.setdefault(a, {})[edge_id] = b
                self.alias_edges[edge_id] = a
            na, nb = self.node_of_entity[a], self.node_of_entity[b]
            if na < 0 or nb < 0:
                columns["status"][row] = DANGLING  # `brain check` reports it; walked once both ends exist
                continue
            columns["status"][row] = WALKED
            slot = self._chunk_slot(knowledge_id) if knowledge_id is not None else None
            owner = int(self.chunks.arrays["node"][slot]) if slot is not None else -1
            weight = EDGE_TYPE_WEIGHTS.get(relation, DEFAULT_EDGE_WEIGHT)
            edge = (owner, relation == mentions.MENTIONS, na, nb)  # each tie knows the relationship's ends
            mine = [(na, nb, weight, *edge)]
            if owner >= 0:
                mine += [(na, owner, weight, *edge), (nb, owner, weight, *edge)]
            ties += mine
            owners.append((row, len(mine)))
        slots = self._add_ties(ties)
        at = 0
        for row, count in owners:
            self.edges.arrays["tie"][row], self.edges.arrays["ties"][row] = slots[at] if count else -1, count
            at += count

    def drop_edge(self, edge_id):
        """A relationship gone or about to be put again."""
        row = self.edge_row.pop(edge_id)
        if row is not None:
            self._drop_edge_row(row, aliases=True)
            self.edges.arrays["status"][row] = 0

    def _drop_edge_row(self, row, aliases):
        columns = self.edges.arrays
        first, count = columns["tie"][row], columns["ties"][row]
        if count:
            self.ties.arrays["live"][first : first + count] = False
        columns["ties"][row] = 0
        edge_id = int(columns["id"][row])
        source = self.alias_edges.pop(edge_id, None) if aliases else None
        if source is not None:
            targets = self.aliases[source]
            del targets[edge_id]
            if not targets:
                del self.aliases[source]

    def edges_of_chunks(self, knowledge_ids):
        """Ids of the walked relationships the chunks stated."""
        edges = self.edges
        held = (edges.status == WALKED) & np.isin(edges.chunk, np.asarray(sorted(knowledge_ids), dtype=np.int64))
        return set(edges.id[held].tolist())

    def edges_waiting_for(self, entity_ids):
        """Ids of the relationships waiting for one of these entities."""
        edges, wanted = self.edges, np.asarray(sorted(entity_ids), dtype=np.int64)
        held = (edges.status == DANGLING) & (np.isin(edges.a, wanted) | np.isin(edges.b, wanted))
        return set(edges.id[held].tolist())

    def dangling(self):
        edges = self.edges
        held = edges.status == DANGLING
        return dict(zip(edges.id[held].tolist(), zip(edges.a[held].tolist(), edges.b[held].tolist())))

    # -- ties and their adjacency --------------------------------------------------

    def _add_ties(self, ties):
        slots = self.ties.add(len(ties))
        if ties:
            arrays = self.ties.arrays
            for name, column in zip(("a", "b", "weight", "owner", "mention", "edge_a", "edge_b"), zip(*ties)):
                arrays[name][slots] = column
            arrays["live"][slots] = True
            if self.adjacency is not None:
                for tie, (a, b, *_) in zip(slots.tolist(), ties):
                    self.recent_ties.setdefault(a, []).append((tie, 0))
                    self.recent_ties.setdefault(b, []).append((tie, 1))
        return slots

    def index_ties(self):
        """Rebuild the adjacency index (every node's ties, by node) when the ties
        added since it was built pass REINDEX_SHARE of it."""
        if self.adjacency is not None:
            indexed = self.adjacency[3]
            if self.ties.size - indexed <= max(REINDEX_MIN, REINDEX_SHARE * indexed):
                return
        ties = self.ties
        ends = np.concatenate([ties.a, ties.b])
        order = np.argsort(ends, kind="stable")
        size = ties.size
        pointers = np.searchsorted(ends[order], np.arange(self.nodes.size + 1))
        self.adjacency = (pointers, (order % max(size, 1)).astype(np.int64), (order >= size).astype(np.int8), size)
        self.recent_ties = {}

    def incident(self, nodes, first=None, after=0):
        """(position in `nodes`, tie, side) of every live tie of each node whose ends
        are live; side 0 when the node is the tie's `a`, 1 when its `b`. With
        `first`, of at most the first `first` ties of each in the adjacency index
        (and every tie added since it was built); with `after`, of those after the
        first `after` only (and none added since): a node's ties read in runs."""
        nodes = np.asarray(nodes, dtype=np.int64)
        pointers, tie_of, side_of, _ = self.adjacency
        covered = len(pointers) - 1
        inside = nodes < covered
        starts = np.zeros(len(nodes), dtype=np.int64)
        stops = np.zeros(len(nodes), dtype=np.int64)
        starts[inside], stops[inside] = pointers[nodes[inside]], pointers[nodes[inside] + 1]
        if first is not None:
            stops = np.minimum(stops, starts + first)
        starts = np.minimum(starts + after, stops)
        if len(nodes) == 1:  # a name in a question: its ties are one run of the index (a speaker's, 10^5 or more)
            where = np.zeros(max(int(stops[0] - starts[0]), 0), dtype=np.int64)
            ties, sides = tie_of[starts[0] : stops[0]], side_of[starts[0] : stops[0]]
        else:
            counts = stops - starts
            where = np.repeat(np.arange(len(nodes)), counts)
            offsets = (
                np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
            )
            ties, sides = tie_of[offsets], side_of[offsets]
        if self.recent_ties and not after:
            extra = [
                (i, tie, side) for i, node in enumerate(nodes.tolist()) for tie, side in self.recent_ties.get(node, ())
            ]
            if extra:
                where = np.concatenate([where, np.array([e[0] for e in extra], dtype=np.int64)])
                ties = np.concatenate([ties, np.array([e[1] for e in extra], dtype=np.int64)])
                sides = np.concatenate([sides, np.array([e[2] for e in extra], dtype=np.int8)])
        t = self.ties
        alive = t.live[ties] & self.nodes.live[t.a[ties]] & self.nodes.live[t.b[ties]]
        return where[alive], ties[alive], sides[alive]

    def run_length(self, node):
        """How many ties of `node` the adjacency index holds (its run), live or not."""
        pointers = self.adjacency[0]
        return int(pointers[node + 1] - pointers[node]) if node < len(pointers) - 1 else 0

    # -- comparing and persisting ----------------------------------------------------

    def fingerprint(self, chunk_ids):
        """What the graph holds, independent of slot order; `chunk_ids` maps chunk
        slots to ids."""
        nodes = self.nodes
        node_entity, node_chunk = nodes.entity, nodes.chunk

        def name(node):
            return (
                ("entity", int(node_entity[node]))
                if node_entity[node] >= 0
                else ("chunk", int(chunk_ids[node_chunk[node]]))
            )

        t = self.ties
        ties = sorted(
            (tuple(sorted((name(a), name(b)))), float(w), name(o) if o >= 0 else ("none", 0))
            for a, b, w, o, alive in zip(t.a, t.b, t.weight, t.owner, t.live)
            if alive and nodes.live[a] and nodes.live[b]
        )
        entities = self.entity_ids().tolist()
        names = {}
        for entity_id in entities:
            node = self.node_of_entity[entity_id]
            name_, tag = self.node_names[node], self.nodes.arrays["tag"][node]
            if not tag and len(name_) >= MENTION_MIN_CHARS:
                for key in mentions.names_of(name_):
                    names.setdefault(key, []).append(entity_id)
        targets = {entity_id: self.alias_target(entity_id) for entity_id in entities}
        return {
            "ties": ties,
            "names": {k: sorted(v) for k, v in names.items()},
            "targets": targets,
            "entities": sorted(entities),
            "dangling": self.dangling(),
        }

    def digest(self, chunk_ids):
        """A hash of `fingerprint`'s contents, computed in bulk."""
        nodes, t = self.nodes, self.ties
        keys = np.where(nodes.entity >= 0, nodes.entity, -1 - gather(chunk_ids, nodes.chunk, 0))
        alive = t.live & nodes.live[t.a] & nodes.live[t.b]
        a, b = keys[t.a[alive]], keys[t.b[alive]]
        owner = gather(keys, t.owner[alive], np.iinfo(np.int64).min)
        low, high, weight = np.minimum(a, b), np.maximum(a, b), t.weight[alive]
        order = np.lexsort((owner, weight, high, low))
        digest = xxhash.xxh64()
        for column in (low, high, weight, owner):
            digest.update(np.ascontiguousarray(column[order]).tobytes())
        entities = np.sort(self.entity_ids())
        digest.update(entities.tobytes())
        names = sorted((key, int(e)) for e in entities.tolist() for key in self._keys(e))
        digest.update(repr(names).encode("utf-8", "surrogatepass"))
        digest.update(repr(sorted((e, self.alias_target(e)) for e in self.aliases)).encode())
        digest.update(repr(sorted(self.dangling().items())).encode())
        return digest.hexdigest()

    def _keys(self, entity_id):
        node = self.node_of_entity[entity_id]
        name = self.node_names[node]
        if self.nodes.arrays["tag"][node] or name is None or len(name) < MENTION_MIN_CHARS:
            return ()
        return mentions.names_of(name)

    def to_arrays(self):
        arrays = {}
        for name in ("nodes", "chunks", "documents", "ties", "edges"):
            arrays.update(getattr(self, name).to_arrays(f"graph.{name}"))
        arrays.update(self.node_of_entity.to_arrays("graph.node_of_entity"))
        arrays.update(self.edge_row.to_arrays("graph.edge_row"))
        for name in ("node_names", "entity_types", "document_ids"):
            arrays.update(getattr(self, name).to_arrays(f"graph.{name}"))
        arrays.update(self.document_index.to_arrays("graph.document_index"))
        pointers, ties, sides, _ = self.adjacency
        arrays.update(
            {"graph.adjacency.pointers": pointers, "graph.adjacency.ties": ties, "graph.adjacency.sides": sides}
        )
        arrays.update(self.names.to_arrays())
        return arrays

    def meta(self):
        return {
            "relations": self.relations,
            "indexed_ties": self.adjacency[3] if self.adjacency else 0,
            "recent_ties": [[node, tie, side] for node, held in self.recent_ties.items() for tie, side in held],
            "aliases": [
                [entity, edge, target] for entity, held in self.aliases.items() for edge, target in held.items()
            ],
        }

    @classmethod
    def from_arrays(cls, arrays, meta):
        graph = cls()
        for name in ("nodes", "chunks", "documents", "ties", "edges"):
            getattr(graph, name).load(arrays, f"graph.{name}")
        graph.node_of_entity = IdMap.from_arrays(arrays, "graph.node_of_entity")
        graph.edge_row = IdMap.from_arrays(arrays, "graph.edge_row")
        for name in ("node_names", "entity_types", "document_ids"):
            setattr(graph, name, Strings.from_arrays(arrays, f"graph.{name}"))
        graph._document_index = StringIndex.from_arrays(arrays, "graph.document_index", graph.document_ids)
        graph.names.load(arrays)
        graph.relations = dict(meta["relations"])
        for entity, edge, target in meta["aliases"]:
            graph.aliases.setdefault(entity, {})[edge] = target
            graph.alias_edges[edge] = entity
        graph.adjacency = (
            arrays["graph.adjacency.pointers"],
            arrays["graph.adjacency.ties"],
            arrays["graph.adjacency.sides"],
            meta["indexed_ties"],
        )
        for node, tie, side in meta["recent_ties"]:
            graph.recent_ties.setdefault(node, []).append((tie, side))
        return graph

    def garbage(self):
        """Dead nodes and ties, and all slots."""
        return int((~self.nodes.live).sum()) + int((~self.ties.live).sum()), self.nodes.size + self.ties.size


# ties of each entity looked at first to find it introduced: the speaker of half a
# long conversation has 10^5 to 10^6 ties, and one seen statement settles it
INTRODUCED_FIRST = 64
# a node's ties counted at once towards a cap (Walk.chunk_degree): a speaker's 500,000 in eight runs
COUNT_BLOCK = 65_536


class Walk:
    """The graph as one caller may walk it: nodes and ties gated by the chunks in
    `visible` (a mask over chunk slots), read lazily from the adjacency index.

    A tie is seen when its ends and the chunk that stated it are visible. An
    entity is known to the caller only from what it may read: a visible chunk's
    document, or a relationship a visible chunk stated (a mention of a name that
    only hidden memories introduce is not walked). Hubs are damped by the degree
    the caller sees: hidden ties count for nothing."""

    def __init__(self, graph, visible):
        self.graph, self.visible = graph, visible
        size = graph.nodes.size
        self._introduced = np.zeros(size, dtype=np.int8)  # 0 unknown, 1 yes, 2 no
        self._degree = np.zeros(size, dtype=np.int32)  # degree + 1; 0 unknown (int32: a walk per recall zeroes it)
        self._node_visible = None  # node_visible of every node, once more nodes are asked than the graph holds

    def node_visible(self, nodes):
        """Visible before the introduced rule: live, and for a chunk, visible."""
        if self._node_visible is not None:
            return self._node_visible[nodes]
        g = self.graph
        if len(nodes) > g.nodes.size:  # the ends of a speaker's 10^5 ties: one pass over the nodes, then a gather
            self._node_visible = self.node_visible(np.arange(g.nodes.size))
            return self._node_visible[nodes]
        chunk = g.nodes.chunk[nodes]
        return g.nodes.live[nodes] & gather(self.visible, chunk, True)

    def seen(self, ties):
        t = self.graph.ties
        owner = t.owner[ties]
        return (
            self.node_visible(t.a[ties])
            & self.node_visible(t.b[ties])
            & ((owner < 0) | self.node_visible(np.maximum(owner, 0)))
        )

    def introduced(self, nodes):
        nodes = np.asarray(nodes, dtype=np.int64)
        unknown = distinct(nodes[self._introduced[nodes] == 0], self.graph.nodes.size)
        if len(unknown):
            is_chunk = self.graph.nodes.chunk[unknown] >= 0
            self._introduced[unknown[is_chunk]] = 1
            entities = unknown[~is_chunk]
            yes = self._stated(entities, first=INTRODUCED_FIRST)  # most are settled by a few of their ties
            if not yes.all():
                yes[~yes] = self._stated(entities[~yes])
            self._introduced[entities] = np.where(yes, 1, 2)
        return self._introduced[nodes] == 1

    def _stated(self, entities, first=None):
        """Per entity, whether a tie of it (of its `first` ties, see incident) is one
        the caller sees that is not a mention: a visible chunk stated it."""
        where, ties, _ = self.graph.incident(entities, first)
        stated = self.seen(ties) & ~self.graph.ties.mention[ties]
        yes = np.zeros(len(entities), dtype=bool)
        yes[where[stated]] = True
        return yes

    def visible_nodes(self, nodes):
        return self.node_visible(nodes) & self.introduced(nodes)

    def kept(self, ties):
        t = self.graph.ties
        keep = self.seen(ties)
        mention = keep & t.mention[ties]
        if mention.any():
            ends = ties[mention]
            keep[mention] = self.introduced(t.edge_a[ends]) & self.introduced(t.edge_b[ends])
        return keep

    def degree(self, nodes):
        """Kept ties at each node, each end of a tie counting once (a loop twice)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        unknown = distinct(nodes[self._degree[nodes] == 0], self.graph.nodes.size)
        if len(unknown):
            where, ties, _ = self.graph.incident(unknown)
            counts = np.bincount(where[self.kept(ties)], minlength=len(unknown))
            self._degree[unknown] = counts + 1
        return self._degree[nodes].astype(np.int64) - 1

    def chunk_degree(self, nodes, cap=None):
        """Per node, the distinct visible chunks of other documents tied to it by ties
        the walk keeps. The nodes' degree is counted from the same ties on the way
        and kept for `degree`: a speaker of half a long conversation has 10^5 to 10^6 ties,
        and deciding whether a name is a seed needs both (graph.naming). With `cap`, one
        node's ties are read COUNT_BLOCK at a time until more than `cap` are counted:
        the count is then over `cap` and not the whole, and the degree is left unknown
        (several nodes are counted whole)."""
        g = self.graph
        nodes = np.asarray(nodes, dtype=np.int64)
        if cap is not None and len(nodes) == 1 and g.run_length(nodes[0]) > COUNT_BLOCK:
            return self._capped_chunk_degree(nodes, cap)
        where, ties, sides = g.incident(nodes)
        kept = self.kept(ties)
        unknown = self._degree[nodes] == 0
        if unknown.any():
            self._degree[nodes[unknown]] = np.bincount(where[kept], minlength=len(nodes))[unknown] + 1
        where, other = self._other_chunks(nodes, where[kept], ties[kept], sides[kept])
        return distinct_counts(where, other, len(nodes), g.nodes.size)

    def _capped_chunk_degree(self, nodes, cap):
        """chunk_degree of one node, its ties read in runs until more than `cap` chunks
        are counted: the speaker of half a conversation is common after its first run."""
        g = self.graph
        tied = np.zeros(g.nodes.size, dtype=bool)
        degree = after = 0
        while not after or after < g.run_length(nodes[0]):
            where, ties, sides = g.incident(nodes, first=after + COUNT_BLOCK, after=after)
            kept = self.kept(ties)
            degree += int(np.count_nonzero(kept))
            tied[self._other_chunks(nodes, where[kept], ties[kept], sides[kept])[1]] = True
            count = np.count_nonzero(tied)
            if count > cap:
                return np.array([count])
            after += COUNT_BLOCK
        if not self._degree[nodes[0]]:
            self._degree[nodes[0]] = degree + 1
        return np.array([count])

    def _other_chunks(self, nodes, where, ties, sides):
        """(position in `nodes`, chunk node) of the ties' ends that are chunks of
        other documents than the node's own."""
        g = self.graph
        t = g.ties
        other = np.where(sides == 0, t.b[ties], t.a[ties])
        chunk_slot = g.nodes.chunk[other]
        is_chunk = chunk_slot >= 0
        where, other, chunk_slot = where[is_chunk], other[is_chunk], chunk_slot[is_chunk]
        own = g.doc_nodes(chunk_slot) == nodes[where]
        return where[~own].astype(np.int64), other[~own].astype(np.int64)

    def out_edges(self, nodes):
        """(position in `nodes`, target node, transition probability) of each node's
        kept ties: weight * min(1, θ / deg(target)), shared by the node's total."""
        g = self.graph
        where, ties, sides = g.incident(nodes)
        kept = self.kept(ties)
        where, ties, sides = where[kept], ties[kept], sides[kept]
        t = g.ties
        targets = np.where(sides == 0, t.b[ties], t.a[ties])
        weight = t.weight[ties] * np.minimum(1.0, PPR_THETA / np.maximum(self.degree(targets), 1))
        out = np.bincount(where, weights=weight, minlength=len(nodes))
        return where, targets, weight / np.where(out[where] > 0, out[where], 1.0), out

    def document_chunks(self, nodes):
        """(position in `nodes`, chunk slot) of the visible chunks of the documents
        whose entities are `nodes`."""
        g = self.graph
        where, ties, sides = g.incident(nodes)
        other = np.where(sides == 0, g.ties.b[ties], g.ties.a[ties])
        slots = g.nodes.chunk[other]
        safe = np.maximum(slots, 0)
        mine = (slots >= 0) & (g.chunks.doc_tie[safe] == ties) & self.visible[safe]
        return where[mine], slots[mine]

    def neighbours(self, nodes):
        """The nodes tied to any of `nodes` by kept ties."""
        where, targets, _, _ = self.out_edges(nodes)
        return distinct(targets, self.graph.nodes.size)

    def rank(self, seeds, damping=PPR_DAMPING):
        """(nodes, scores) of PPR from `seeds` ({node: weight}) over visible nodes
        and kept ties: the nodes it reached, in the order reached. With damping 0.5
        the mass still moving halves each step, so a few steps settle the ranking.
        Mass at a node with no way out goes back to the seeds."""
        nodes = np.array(sorted(seeds), dtype=np.int64)
        weights = np.array([seeds[n] for n in sorted(seeds)], dtype=np.float64)
        if len(nodes):
            keep = self.visible_nodes(nodes)
            nodes, weights = nodes[keep], weights[keep]
        if not len(nodes) or weights.sum() <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        active = nodes
        position = np.zeros(self.graph.nodes.size, dtype=np.int64)  # node -> its place in `active`, + 1
        position[active] = np.arange(1, len(active) + 1)
        restart = weights / weights.sum()
        scores = restart.copy()
        expanded = np.zeros(len(active), dtype=bool)  # its ties read
        dangling = np.zeros(len(active), dtype=bool)  # read, and none kept
        sources, targets, chances = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
        for _ in range(MAX_ITERATIONS):
            todo = np.flatnonzero(~expanded & (scores > PPR_PRUNE))
            if len(todo) and len(active) <= MAX_WALKED_NODES:
                # the ties of the nodes whose score moves for the first time
                where, to, chance, out = self.out_edges(active[todo])
                new = distinct(to[position[to] == 0], self.graph.nodes.size)
                if len(new):
                    position[new] = np.arange(len(active) + 1, len(active) + len(new) + 1)
                    active = np.concatenate([active, new])
                    grow = np.zeros(len(new))
                    scores, restart = np.concatenate([scores, grow]), np.concatenate([restart, grow])
                    expanded = np.concatenate([expanded, np.zeros(len(new), dtype=bool)])
                    dangling = np.concatenate([dangling, np.zeros(len(new), dtype=bool)])
                expanded[todo], dangling[todo] = True, out == 0
                sources.append(todo[where])
                targets.append(position[to] - 1)
                chances.append(chance)
                sources, targets, chances = (
                    [np.concatenate(sources)],
                    [np.concatenate(targets)],
                    [np.concatenate(chances)],
                )
            spread = np.bincount(targets[0], weights=chances[0] * scores[sources[0]], minlength=len(active))
            updated = (1 - damping) * restart + damping * (spread + scores[dangling].sum() * restart)
            converged = np.abs(updated - scores).sum() < TOLERANCE
            scores = updated
            if converged:
                break
        return active, scores
