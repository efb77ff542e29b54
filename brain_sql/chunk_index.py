"""The read state's chunk index: for every chunk, its id, its filter columns (the
ones vec_knowledge mirrors), its length in tokens and its int8 vector — what the
filters and the vector leg read, in numpy arrays.

The vector leg is exact: the same cosine distances vec0 computes, the same
answer with the same ties. A SIMD kernel (simsimd, the one usearch is built on)
computes the int8 cosine of every visible row at memory speed, in integers where
vec0 does; its float rounding (about 1e-7) is far inside the margin within which
candidates are scored again with vec0's own arithmetic.

When many chunks are visible, a first pass over each chunk's sign code
(vector_codes.py, 32 bytes where the vector takes 256) picks the shortlist the
exact scan scores: the visible mask acts inside it (hidden chunks are never
counted among the nearest), its picks are the same in a followed state as in a
fresh build, and the distances returned are still vec0's. Which chunks it finds
is then an estimate: $BRAIN_VECTOR_CODES (config.py) chooses, and docs/scale.md
gives what it finds and costs.
"""

import math
import threading

import numpy as np
import simsimd
import xxhash

from .config import (
    VECTOR_CODES_MIN_SHORTLIST,
    VECTOR_CODES_MIN_VISIBLE,
    VECTOR_CODES_SHORTLIST_FACTOR,
    vector_codes_enabled,
)
from .schema import fts_lengths
from .slots import IdMap, Slots
from .vector_codes import SignCodes, kernel
from .vectors import ALWAYS_VALID_EPOCH, NEVER_EXPIRES_EPOCH, VEC_METADATA

TEXT_COLUMNS = tuple(name for name, (kind, _) in VEC_METADATA.items() if kind == "text")
SHORTLIST_MARGIN = 1e-5  # a candidate within this of the n-th distance is scored exactly
GATHER_SHARE = 0.25  # below this share of rows visible, their vectors are gathered first
TIME_COLUMNS = ("expires_at", "valid_from", "valid_until")  # the filter columns compared with `now`
CACHED_MASKS = 8


class StoredVectors:
    """Int8 vectors by chunk id, with where vec0 stores each (its chunk and the
    offset in it, which decide which of equal distances its KNN keeps)."""

    def __init__(self, ids, matrix, chunk, offset):
        order = np.argsort(ids, kind="stable")
        self.ids, self.matrix = ids[order], matrix[order]
        self.chunk, self.offset = chunk[order], offset[order]

    def take(self, ids):
        """(found mask over `ids`, their vectors, vec0 chunks, offsets)."""
        at = np.minimum(np.searchsorted(self.ids, ids), max(len(self.ids) - 1, 0))
        found = (self.ids[at] == ids) if len(self.ids) else np.zeros(len(ids), dtype=bool)
        at = at[found]
        return found, self.matrix[at], self.chunk[at], self.offset[at]


class ChunkIndex:
    """Chunks in slots; `slot_of` maps a knowledge id to its slot."""

    def __init__(self, dimension):
        self.dimension = dimension
        self.codes = {name: {} for name in TEXT_COLUMNS}  # text filter values -> small integers
        self.rows = Slots(
            {
                "id": (np.int64, ()),
                "live": (np.bool_, ()),
                "length": (np.int64, ()),
                "has_vector": (np.bool_, ()),
                "sqnorm": (np.int64, ()),
                "vec_chunk": (np.int64, ()),
                "vec_offset": (np.int64, ()),
                "vector": (np.int8, (dimension,)),
                **{name: (np.int64, ()) for name in VEC_METADATA},
            }
        )
        self.slot_of = IdMap()
        self.count = 0  # live chunks
        self.changes = 0  # bumped by every add and remove: what the cached masks were made at
        self._masks = {}  # (changes, timeless clauses) -> mask
        self._rows_in = {}  # id(mask) -> (that mask, changes, ids, lengths, tokens): rows_in of a cached mask
        self._timed_at, self._timed_slots = None, None
        self.signs = None  # the vectors' sign codes (SignCodes), while $BRAIN_VECTOR_CODES is on
        self._making = threading.Lock()

    # -- reading ---------------------------------------------------------------

    @property
    def size(self):
        return self.rows.size

    def columns(self):
        """Each slot's filter columns (text ones as codes; see `codes`)."""
        return {name: self.rows.arrays[name][: self.rows.size] for name in VEC_METADATA}

    def visible(self, filters):
        """Boolean mask over slots: live chunks the filters admit (read-only).

        Most clauses name no time, and most chunks never expire nor end: the mask
        of the timeless clauses is kept until the index changes, and the clauses
        on `now` are applied to the few chunks with a time bound only."""
        columns = self.columns()
        timeless = {name: column for name, column in columns.items() if name not in TIME_COLUMNS}
        key = (self.changes, tuple(filters.clauses(timeless)))
        mask = self._masks.get(key)
        if mask is None:
            mask = self.rows.live & filters.mask(timeless, self.codes)
            mask.flags.writeable = False
            if len(self._masks) >= CACHED_MASKS:
                self._masks.pop(next(iter(list(self._masks))), None)  # list(): other readers add masks meanwhile
            self._masks[key] = mask
        timed = self._timed()
        timed = timed[mask[timed]]
        if not len(timed) or not filters.clauses(TIME_COLUMNS):
            return mask
        ok = filters.mask({name: columns[name][timed] for name in TIME_COLUMNS})
        if ok.all():
            return mask
        mask = mask.copy()
        mask[timed[~ok]] = False
        mask.flags.writeable = False
        return mask

    def _timed(self):
        """Live slots with a time bound: an expiry, or a validity that begins or ends."""
        if self._timed_at != self.changes:
            rows = self.rows
            bounded = (rows.expires_at != NEVER_EXPIRES_EPOCH) | (rows.valid_from != ALWAYS_VALID_EPOCH)
            self._timed_slots = np.flatnonzero(rows.live & (bounded | (rows.valid_until != NEVER_EXPIRES_EPOCH)))
            self._timed_at = self.changes
        return self._timed_slots

    def rows_in(self, mask):
        """(ids, lengths in tokens, their sum) of the slots in `mask`, read-only: a
        request's reach, which every recall with the same filters asks for again (a
        million-row copy each time). Kept while `mask` is a cached one (`visible`),
        for the index's state it was made at."""
        kept = self._rows_in.get(id(mask))
        if kept is not None and kept[0] is mask and kept[1] == self.changes:
            return kept[2:]
        slots = np.flatnonzero(mask)
        ids, lengths = self.rows.id[slots], self.rows.length[slots]
        ids.flags.writeable = lengths.flags.writeable = False
        found = ids, lengths, int(lengths.sum())
        if any(mask is cached for cached in list(self._masks.values())):  # list(): other readers add masks
            if len(self._rows_in) >= CACHED_MASKS:
                self._rows_in.pop(next(iter(list(self._rows_in))), None)
            self._rows_in[id(mask)] = (mask, self.changes, *found)
        return found

    def ids(self, slots):
        return self.rows.id[slots]

    def nearest(self, query, visible, n):
        """[(chunk id, cosine distance)] of the `n` visible chunks nearest to the int8
        vector `query` (bytes), nearest first, equal distances by id: what the vec0
        KNN returns, to the bit (its integer sums, then square roots and the
        division in double, rounded to float; equal distances cut as it cuts them)."""
        rows = self.rows
        q = np.frombuffer(query, dtype=np.int8)
        query_norm = float((q.astype(np.int64) ** 2).sum())
        searchable = visible & rows.has_vector
        count = int(searchable.sum())
        if not query_norm or not count:
            return []
        slots = self._shortlist(q, searchable, count, n)
        if slots is None and count < GATHER_SHARE * rows.size:
            slots = np.flatnonzero(searchable)
        if slots is not None:
            count = len(slots)
            approximate = np.asarray(simsimd.cdist(q[None], rows.vector[slots], metric="cosine"))[0]
        else:
            approximate = np.asarray(simsimd.cdist(q[None], rows.vector, metric="cosine"))[0]
            approximate[~searchable] = np.inf
        if count > n:
            kth = np.partition(approximate, n - 1)[n - 1]
            within = np.flatnonzero(approximate <= kth + SHORTLIST_MARGIN)
        else:
            within = np.flatnonzero(np.isfinite(approximate))
        candidates = within if slots is None else slots[within]
        distance = self._exact(candidates, q, query_norm)
        # which of equal distances make the cut is vec0's choice: it scans its chunks in
        # order, keeps what it has over an equal newcomer, and within a chunk takes the later row
        kept = np.lexsort((-rows.vec_offset[candidates], rows.vec_chunk[candidates], distance))[:n]
        candidates, distance = candidates[kept], distance[kept]
        ids = rows.id[candidates]
        order = np.lexsort((ids, distance))
        return [(int(ids[i]), float(distance[i])) for i in order]

    def _shortlist(self, q, searchable, count, n):
        """The slots of the visible chunks the sign codes estimate nearest to `q`,
        every one as near as the last of them included (so the cut does not depend
        on where chunks sit); None to scan every visible chunk: the codes off, or
        too few chunks visible for a first pass to pay. The shortlist grows with
        the square root of the visible chunks (docs/scale.md has the measurements)."""
        size = max(n, VECTOR_CODES_MIN_SHORTLIST, math.ceil(VECTOR_CODES_SHORTLIST_FACTOR * math.sqrt(count)))
        if count < VECTOR_CODES_MIN_VISIBLE or size >= count or not vector_codes_enabled() or not kernel():
            return None
        codes = self.signs or self.make_codes()
        if count < GATHER_SHARE * self.rows.size:
            slots = np.flatnonzero(searchable)
            estimate = codes.estimate(q, slots)
        else:
            slots = None
            estimate = codes.estimate(q)
            estimate[~searchable] = np.inf  # the hidden are never among the nearest
        within = _smallest(estimate, size)
        return within if slots is None else slots[within]

    def distances(self, query, ids):
        """{id: cosine distance to the int8 vector `query` (bytes)} of those of chunks
        `ids` it holds with a vector: vec0's distance to the bit, as `nearest` gives it."""
        rows = self.rows
        slots = self.slot_of.many(ids)
        slots = slots[slots >= 0]
        slots = slots[rows.has_vector[slots]]
        q = np.frombuffer(query, dtype=np.int8)
        query_norm = float((q.astype(np.int64) ** 2).sum())
        if not len(slots) or not query_norm:
            return {}
        return dict(zip(rows.id[slots].tolist(), self._exact(slots, q, query_norm).tolist()))

    def _exact(self, slots, q, query_norm):
        """vec0's int8 cosine distance of `slots` to `q`: integer sums, then square
        roots and the division in double, rounded to float."""
        rows = self.rows
        dots = (rows.vector[slots].astype(np.int64) @ q.astype(np.int64)).astype(np.float64)
        return (1.0 - dots / (np.sqrt(rows.sqnorm[slots].astype(np.float64)) * np.sqrt(query_norm))).astype(np.float32)

    # -- writing ---------------------------------------------------------------

    def add(self, rows, vectors):
        """Slots for chunks: `rows` are (id, *VEC_METADATA values, FTS5 docsize blob),
        `vectors` a StoredVectors holding theirs (where vec0 has them)."""
        slots = self.rows.add(len(rows))
        arrays = self.rows.arrays
        columns = list(zip(*rows)) or [()] * (2 + len(VEC_METADATA))
        ids = np.array(columns[0], dtype=np.int64)
        arrays["id"][slots] = ids
        arrays["length"][slots] = fts_lengths(columns[0], columns[1 + len(VEC_METADATA)])
        arrays["live"][slots] = True
        for i, name in enumerate(VEC_METADATA):
            values = columns[1 + i]
            if name in TEXT_COLUMNS:
                codes = self.codes[name]
                values = [codes[v] if v in codes else codes.setdefault(v, len(codes)) for v in values]
            arrays[name][slots] = values
        found, matrix, chunk, offset = vectors.take(ids)
        where = slots[found]
        if len(where):
            arrays["vector"][where] = matrix
            arrays["has_vector"][where] = True
            for start in range(0, len(where), 65536):  # int64 sums of squares, a slice at a time
                part = matrix[start : start + 65536].astype(np.int64)
                arrays["sqnorm"][where[start : start + 65536]] = np.einsum("ij,ij->i", part, part)
            arrays["vec_chunk"][where], arrays["vec_offset"][where] = chunk, offset
        if self.signs is not None:
            self.signs.add(slots, self.rows.vector, self.rows.sqnorm, where)
        self.slot_of.set(ids, slots)
        self.count += len(ids)
        self.changes += 1
        return slots

    def remove(self, ids):
        """Retire the slots of chunks `ids` (those it holds); returns them."""
        slots = self.slot_of.many(ids)
        slots = slots[slots >= 0]
        if len(slots):
            if self.signs is not None:
                self.signs.remove(self.rows.vector, self.rows.sqnorm, slots[self.rows.has_vector[slots]])
            self.rows.arrays["live"][slots] = False
            self.slot_of.set(self.rows.id[slots], -1)
            self.count -= len(slots)
        self.changes += 1
        return slots

    def dead(self):
        return self.rows.size - self.count

    def make_codes(self):
        """The sign codes of every slot, made now (after a build, or for a snapshot
        saved without them); they then follow every add and remove."""
        with self._making:
            if self.signs is None:
                signs = SignCodes(self.dimension)
                rows = self.rows
                signs.make(rows.vector, rows.sqnorm, rows.live & rows.has_vector)
                self.signs = signs
            return self.signs

    # -- comparing and persisting ----------------------------------------------

    def fingerprint(self):
        """{id: filter columns and length}, {id: vector}, {id: sign code} (None
        without codes): independent of slot order."""
        rows = self.rows
        live = np.flatnonzero(rows.live)
        decode = {name: {code: value for value, code in self.codes[name].items()} for name in TEXT_COLUMNS}
        columns = {
            int(rows.id[s]): tuple(
                decode[c][rows.arrays[c][s]] if c in decode else int(rows.arrays[c][s]) for c in VEC_METADATA
            )
            + (int(rows.length[s]),)
            for s in live
        }
        vectors = {int(rows.id[s]): rows.vector[s].tobytes() for s in live if rows.has_vector[s]}
        signs = None
        if self.signs is not None:
            held = self.signs.rows
            signs = {
                int(rows.id[s]): (held.bits[s].tobytes(), int(held.sq[s]), int(held.l1[s]), float(held.weight[s]))
                for s in live
            }
            signs["center"] = self.signs.center.tobytes()
        return columns, vectors, signs

    def digest(self):
        """A hash of `fingerprint`'s contents, computed in bulk: for comparing a
        million chunks with a fresh build."""
        rows = self.rows
        live = np.flatnonzero(rows.live)
        live = live[np.argsort(rows.id[live], kind="stable")]
        digest = xxhash.xxh64()
        for name in ("id", "length", "has_vector", *VEC_METADATA):
            column = rows.arrays[name][live]
            if name in TEXT_COLUMNS:
                values = np.array(list(self.codes[name]) or [""], dtype=object)
                digest.update("\0".join(values[column]).encode("utf-8", "surrogatepass"))
            else:
                digest.update(np.ascontiguousarray(column).tobytes())
        digest.update(np.ascontiguousarray(rows.vector[live]).tobytes())
        if self.signs is not None:
            digest.update(self.signs.center.tobytes())
            for array in self.signs.rows.arrays.values():
                digest.update(np.ascontiguousarray(array[live]).tobytes())
        return digest.hexdigest()

    def to_arrays(self):
        signs = self.signs.to_arrays() if self.signs is not None else {}
        return {**self.rows.to_arrays("chunks"), **signs}

    def meta(self):
        return {
            "codes": {name: list(codes) for name, codes in self.codes.items()},
            "signs": self.signs.meta() if self.signs is not None else None,
        }

    @classmethod
    def from_arrays(cls, dimension, arrays, meta):
        index = cls(dimension)
        index.rows.load(arrays, "chunks")
        index.codes = {
            name: {value: code for code, value in enumerate(values)} for name, values in meta["codes"].items()
        }
        live = np.flatnonzero(index.rows.live)
        index.slot_of.set(index.rows.id[live], live)
        index.count = len(live)
        index.changes = 1
        if vector_codes_enabled():  # a snapshot without them (or around another grid) makes them
            index.signs = SignCodes.from_arrays(dimension, arrays, meta.get("signs"), index.rows.size)
            if index.signs is None:
                index.make_codes()
        return index


def _smallest(values, size, sample=16384):
    """Positions of the `size` smallest of `values` and of every one as small as the
    last of them: the same set wherever each value sits. A sample's quantile first
    bounds the search to about twice as many, when that leaves enough (the answer is
    the same either way; a million values are then not all partitioned)."""
    stride = len(values) // sample
    if stride > 1:
        sampled = values[::stride]
        at = min(len(sampled) - 1, 2 * size // stride + 16)
        bound = np.partition(sampled, at)[at]
        below = np.flatnonzero(values <= bound)
        if len(below) >= size:
            held = values[below]
            return below[held <= np.partition(held, size - 1)[size - 1]]
    return np.flatnonzero(values <= np.partition(values, size - 1)[size - 1])
