"""The lexical leg's postings, kept in memory beside the read state: for each
term, the chunk slots holding it and its weighted frequency there (each
occurrence weighed by its column's FTS weight, as bm25() weighs it).

A query is scored with MaxScore: each term's score is bounded from its highest
frequency and shortest row, so the long lists of common words are only consulted
at the candidates rarer words name, never scored in full. Final scores are
computed phrase by phrase, in the query's order, operation for operation as
fts5_aux.c computes them: FTS5's bm25() to the bit where nothing is hidden, and
the same formula with every statistic (row count, average length, document
frequencies) over the visible rows where something is.

Everything is numpy arrays plus a term dictionary (to_arrays / from_arrays), kept
in segments: each holds slots sharing their high 16 bits (so a slot takes two
bytes) and a weight takes one (larger ones aside); new rows make small segments,
merged as they grow.
"""

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import xxhash

from . import lexical
from .config import FTS_COLUMN_WEIGHTS, RECALL_CANDIDATES
from .schema import fts_damaged
from .slots import hashed_at

K1, B = 1.2, 0.75  # FTS5's bm25 constants (fts5_aux.c)
IDF_FLOOR = 1e-6  # FTS5's idf for a phrase in half the rows or more
BLOCK_BITS = 16  # a segment's slots share the bits above these
WIDE = 255  # a weight stored as this is looked up in the segment's wide weights
BATCH = 2048  # rows tokenized at once
SLACK = 1e-9  # relative margin on score bounds, far above any rounding in them
# Weights are kept as whole units: FTS_COLUMN_WEIGHTS are binary fractions (floats), so
# a unit of 1/UNIT makes every weighted frequency whole, and exact, as FTS5's sums are.
UNIT = math.lcm(*(Fraction(w).denominator for w in FTS_COLUMN_WEIGHTS))
if UNIT > 256:
    raise ValueError(f"FTS_COLUMN_WEIGHTS {FTS_COLUMN_WEIGHTS} must be multiples of 1/256")
UNIT_WEIGHTS = tuple(int(w * UNIT) for w in FTS_COLUMN_WEIGHTS)


@lru_cache(maxsize=8192)
def _phrase_terms(words):
    return lexical.phrase_terms(words)


class _Segment:
    """Postings of slots in one block (slots with the same bits above BLOCK_BITS),
    by term: `terms` ascending, term i's postings at starts[i]:starts[i + 1], their
    slots ascending (`low`: the low bits) and weights (`units`; WIDE: in `wide`).
    Per term, `peak` is its highest weight and `shortest` the shortest row holding it."""

    ARRAYS = ("terms", "starts", "low", "units", "wide_at", "wide_units", "peak", "shortest")

    def __init__(self, block, **arrays):
        self.block = block
        self.base = block << BLOCK_BITS
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])
        self.first = self.base + int(self.low.min()) if len(self.low) else self.base
        self.last = self.base + int(self.low.max()) if len(self.low) else self.base - 1

    @classmethod
    def build(cls, block, term, low, units, shortest):
        """From postings sorted by term then slot, `shortest` holding the length of
        each one's row (or a lower bound of it)."""
        at = np.flatnonzero(np.concatenate(([True], term[1:] != term[:-1]))) if len(term) else np.zeros(0, np.int64)
        wide = np.flatnonzero(units >= WIDE)
        return cls(
            block,
            terms=term[at].astype(np.int32),
            starts=np.append(at, len(term)).astype(np.int64),
            low=low.astype(np.uint16),
            units=np.minimum(units, WIDE).astype(np.uint8),
            wide_at=wide.astype(np.int64),
            wide_units=units[wide].astype(np.uint32),
            peak=np.maximum.reduceat(units, at).astype(np.uint32) if len(at) else np.zeros(0, np.uint32),
            shortest=np.minimum.reduceat(shortest, at).astype(np.int32) if len(at) else np.zeros(0, np.int32),
        )

    def __len__(self):
        return len(self.low)

    def units_in(self, a, b):
        """The weights of postings a:b, in units."""
        units = self.units[a:b].astype(np.uint32)
        i, j = np.searchsorted(self.wide_at, (a, b))
        units[self.wide_at[i:j] - a] = self.wide_units[i:j]
        return units

    def units_at(self, at):
        """The weights of the postings at `at`, in units."""
        units = self.units[at].astype(np.uint32)
        wide = units == WIDE
        if wide.any():
            units[wide] = self.wide_units[np.searchsorted(self.wide_at, at[wide])]
        return units

    def within(self, slots):
        """(i, j): the part of sorted `slots` in this segment's range."""
        i, j = np.searchsorted(slots, (self.first, self.last + 1))
        return int(i), int(j)

    def locate(self, a, b, slots):
        """For sorted `slots` in this segment's range, their positions among
        postings a:b, or -1 where they hold no posting there."""
        keys = (slots - self.base).astype(np.uint16)
        at = np.minimum(np.searchsorted(self.low[a:b], keys), b - a - 1) + a
        return np.where(self.low[at] == keys, at, -1)

    def postings(self):
        """(term, slot, units) of every posting, in order."""
        term = np.repeat(self.terms.astype(np.int64), np.diff(self.starts))
        return term, self.base + self.low.astype(np.int64), self.units_in(0, len(self.low))

    def arrays(self):
        return {name: getattr(self, name) for name in self.ARRAYS}


class _Held:
    """Where a phrase of a query is held: pieces of segments (a term's postings),
    or given slots and frequencies (a phrase of several terms)."""

    def __init__(self, pieces=(), slots=None, frequencies=None):
        self.pieces = list(pieces)  # (segment, a, b, term index in the segment)
        self.given = slots is not None
        if self.given:
            order = np.argsort(slots, kind="stable")
            self.slots_, self.frequencies_ = (
                np.asarray(slots, np.int64)[order],
                np.asarray(frequencies, np.float64)[order],
            )
        self.count = len(self.slots_) if self.given else sum(b - a for _, a, b, _ in self.pieces)

    def slots(self):
        if self.given:
            return self.slots_
        if not self.pieces:
            return np.zeros(0, np.int64)
        return np.concatenate([seg.base + seg.low[a:b].astype(np.int64) for seg, a, b, _ in self.pieces])

    def frequencies(self):
        if self.given:
            return self.frequencies_
        if not self.pieces:
            return np.zeros(0)
        return np.concatenate([seg.units_in(a, b) for seg, a, b, _ in self.pieces]) / UNIT

    def lookup(self, slots):
        """The frequency at each of sorted `slots` (0 where it is not held)."""
        found = np.zeros(len(slots))
        if self.given:
            at = np.minimum(np.searchsorted(self.slots_, slots), max(len(self.slots_) - 1, 0))
            if len(self.slots_):
                hit = self.slots_[at] == slots
                found[hit] = self.frequencies_[at[hit]]
            return found
        for seg, a, b, _ in self.pieces:
            i, j = seg.within(slots)
            if i < j:
                at = seg.locate(a, b, slots[i:j])
                hit = at >= 0
                found[i:j][hit] = seg.units_at(at[hit]) / UNIT
        return found

    def count_in(self, slots):
        """How many of sorted `slots` hold this term."""
        count = 0
        for seg, a, b, _ in self.pieces:
            i, j = seg.within(slots)
            if i < j:
                count += int((seg.locate(a, b, slots[i:j]) >= 0).sum())
        return count

    def peaks(self, lengths):
        """(highest frequency, shortest length) pairs bounding every posting."""
        if self.given:
            if not len(self.slots_):
                return []
            return [(float(self.frequencies_.max()), float(lengths[self.slots_].min()))]
        return [(int(seg.peak[e]) / UNIT, float(seg.shortest[e])) for seg, _, _, e in self.pieces]


# what BM25's mean length of 0 means when some row holds a word: no length is read right
ZERO_LENGTHS = "the memories holding the words searched for have no length in knowledge_fts_docsize"


def idf(rows, hits):
    """A phrase's idf, as fts5_aux.c computes it: `hits` of `rows` rows hold it."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else IDF_FLOOR


def saturation(frequency, length, avgdl):
    """BM25's term frequency part, as fts5_aux.c computes it."""
    return (frequency * (K1 + 1.0)) / (frequency + K1 * (1 - B + B * length / avgdl))


def _spelled(term):
    """A term's bytes as the snapshot holds them (any lone surrogate term_text kept, too)."""
    return term.encode("utf-8", "surrogatepass")


def _hash(spelled):
    return xxhash.xxh3_64_intdigest(spelled)


class Terms:
    """Term -> its number, numbered in the order terms came. Loaded from a snapshot it
    is the terms' bytes and a table of their hashes, sorted: no Python object a term, so
    a million terms load in no time (a dict of them took most of a second); terms that
    come later are kept in a dict beside it."""

    def __init__(self, blob=b"", hashes=None, order=None):
        self._blob = blob  # the first terms' bytes, one a line
        nl = np.flatnonzero(np.frombuffer(blob, np.uint8) == 10) if blob else np.zeros(0, np.int64)
        self._starts = np.concatenate(([0], nl + 1)) if blob else np.zeros(0, np.int64)
        self._ends = np.concatenate((nl, [len(blob)])) if blob else np.zeros(0, np.int64)
        self._hashes = np.zeros(0, np.uint64) if hashes is None else hashes  # ascending
        self._order = np.zeros(0, np.int64) if order is None else order  # the number of each hash's term
        self._added = {}  # the later terms

    def __len__(self):
        return len(self._starts) + len(self._added)

    def get(self, term, default=-1):
        number = self._added.get(term)
        if number is not None:
            return number
        if len(self._hashes):
            spelled = _spelled(term)
            for at in hashed_at(self._hashes, np.uint64(_hash(spelled))):
                number = int(self._order[at])
                if self._blob[self._starts[number] : self._ends[number]] == spelled:
                    return number
        return default

    def lookup(self, terms):
        """Each of `terms`' number, -1 for one not held: get() for many at once."""
        numbers = np.full(len(terms), -1, np.int64)
        stored = []
        for i, term in enumerate(terms):
            number = self._added.get(term)
            if number is None:
                stored.append(i)
            else:
                numbers[i] = number
        if stored and len(self._hashes):
            spelled = [_spelled(terms[i]) for i in stored]
            keys = np.fromiter((_hash(b) for b in spelled), np.uint64, len(spelled))
            at = np.searchsorted(self._hashes, keys).tolist()
            hashes, order, blob, starts, ends = self._hashes, self._order, self._blob, self._starts, self._ends
            for i, key, word, k in zip(stored, keys, spelled, at):
                while k < len(hashes) and hashes[k] == key:
                    number = int(order[k])
                    if blob[starts[number] : ends[number]] == word:
                        numbers[i] = number
                        break
                    k += 1
        return numbers

    def number(self, term):
        """The term's number, a new one for a new term."""
        number = self.get(term)
        if number < 0:
            number = self._added[term] = len(self)
        return number

    def in_order(self):
        """Every term, by number."""
        first = self._blob.decode("utf-8", "surrogatepass").split("\n") if self._blob else []
        return first + sorted(self._added, key=self._added.__getitem__)

    def items(self):
        return zip(self.in_order(), range(len(self)))

    def to_arrays(self):
        """The terms as from_arrays reads them: the stored ones' bytes and hash table as
        they are, the later ones hashed and merged in (a million terms are not hashed again)."""
        later = [_spelled(t) for t in sorted(self._added, key=self._added.__getitem__)]
        hashes = np.concatenate((self._hashes, np.fromiter((_hash(b) for b in later), np.uint64, len(later))))
        numbers = np.concatenate((self._order, np.arange(len(self._starts), len(self), dtype=np.int64)))
        order = np.argsort(hashes, kind="stable")
        blob = b"\n".join(([self._blob] if len(self._starts) else []) + later)
        return {
            "terms": np.frombuffer(blob, np.uint8).copy(),
            "term_hashes": hashes[order],
            "term_order": numbers[order],
        }

    @classmethod
    def from_arrays(cls, arrays):
        return cls(arrays["terms"].tobytes(), arrays["term_hashes"], arrays["term_order"])

    def copy(self):
        fresh = Terms()
        fresh._blob, fresh._starts, fresh._ends = self._blob, self._starts, self._ends
        fresh._hashes, fresh._order, fresh._added = self._hashes, self._order, dict(self._added)
        return fresh


class Postings:
    """Postings of rows kept at slots (the read state's chunk slots: integers that
    only grow). See the module's docstring."""

    def __init__(self):
        self.vocabulary = Terms()
        self.segments = []  # by slot
        self.size = 0  # one past the highest slot added

    # -- building ------------------------------------------------------------------

    def prepare(self, first, rows):
        """What `add` works out from `rows` alone, for rows about to take the slots from
        `first` on: each batch's terms and the numbers the vocabulary holds for them. A
        refresh prepares its rows beside the readers; `add` then numbers the new terms
        and appends, while the readers wait."""
        rows = list(rows)
        batches = []
        for start, end in _batches(np.arange(first, first + len(rows), dtype=np.int64)):
            found = lexical.index_terms(rows[start:end], UNIT_WEIGHTS)
            batches.append((found, self.vocabulary.lookup(found.terms)))
        return first, len(rows), batches

    def add(self, slots, rows, prepared=None):
        """Index `rows` (each its columns' texts, as knowledge_fts's: title, content,
        context; None for none) at `slots`, ascending and above every slot added
        before; with what `prepare` made of them, when it was for these slots.
        Returns each row's length in tokens (FTS5's docsize)."""
        slots = np.asarray(slots, dtype=np.int64)
        rows = list(rows)
        if len(slots) != len(rows):
            raise ValueError("one slot per row")
        if len(slots) and (slots[0] < self.size or np.any(np.diff(slots) <= 0)):
            raise ValueError("slots must ascend, above every slot added before")
        if prepared is not None:
            first, count, batches = prepared
            if count != len(slots) or (count and (slots[0] != first or slots[-1] != first + count - 1)):
                prepared = None  # made for other slots
        lengths = np.zeros(len(rows), dtype=np.int64)
        for at, (start, end) in enumerate(_batches(slots)):
            if prepared is None:
                found = lexical.index_terms(rows[start:end], UNIT_WEIGHTS)
                known = self.vocabulary.lookup(found.terms)
            else:
                found, known = batches[at]
            number = np.array(
                [n if n >= 0 else self.vocabulary.number(t) for n, t in zip(known.tolist(), found.terms)], np.int64
            )
            lengths[start:end] = found.tokens
            # found is by term (its own numbering) then row: put its terms in our order
            count = np.bincount(found.term, minlength=len(number))
            order = np.argsort(number)
            at = np.repeat(
                np.cumsum(count) - count - (np.cumsum(count[order]) - count[order])[np.argsort(order)], count
            )
            by_number = np.empty(len(at), dtype=np.int64)
            by_number[np.arange(len(at)) - at] = np.arange(len(at))
            row = found.row[by_number]
            self._append(
                number[found.term[by_number]],
                slots[start:end][row],
                found.weight[by_number].astype(np.uint32),
                found.tokens[row],
            )
        if len(slots):
            self.size = int(slots[-1]) + 1
        if len(rows) >= BATCH and self.segments:  # many rows: one segment, as fewer make searches quicker
            self._seal(before=self.segments[-1].block + 1)
        return lengths

    def _append(self, term, slot, units, length):
        """Add postings of one block, sorted by term then slot, as a segment: merged
        with the ones before it as they grow, the earlier blocks' sealed into one."""
        number = int(slot[0]) >> BLOCK_BITS if len(slot) else 0
        if not len(slot):
            return
        self._seal(before=number)
        self.segments.append(_Segment.build(number, term, slot & 0xFFFF, units, length))
        while (
            len(self.segments) > 1
            and self.segments[-2].block == number
            and len(self.segments[-2]) <= 2 * len(self.segments[-1])
        ):
            self.segments[-2:] = [_merge(*self.segments[-2:])]

    def _seal(self, before):
        """Merge the segments of each block before `before` into one."""
        while (
            len(self.segments) > 1
            and self.segments[-1].block < before
            and self.segments[-2].block == self.segments[-1].block
        ):
            self.segments[-2:] = [_merge(*self.segments[-2:])]

    def compacted(self, slot_of, lengths):
        """A copy holding each slot s at slot_of[s] (ascending where not -1; -1:
        left out), `lengths` being the rows' lengths at their new slots."""
        slot_of = np.asarray(slot_of, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        moved = slot_of[: self.size][slot_of[: self.size] >= 0]
        if np.any(np.diff(moved) <= 0):
            raise ValueError("slots kept must keep their order")
        fresh = Postings()
        fresh.vocabulary = self.vocabulary.copy()
        for seg in self.segments:
            term, slot, units = seg.postings()
            new = slot_of[slot]
            for block in np.unique(new[new >= 0] >> BLOCK_BITS).tolist():
                kept = (new >> BLOCK_BITS) == block
                fresh._append(term[kept], new[kept], units[kept], lengths[new[kept]])
        fresh._seal(before=1 << 62)
        fresh.size = int(moved[-1]) + 1 if len(moved) else 0
        return fresh

    # -- reading -------------------------------------------------------------------

    def held(self, terms):
        """A _Held for each of `terms` (index terms, as FTS5 stems them)."""
        numbers = [self.vocabulary.get(term, -1) for term in terms]
        pieces = [[] for _ in terms]
        for seg in self.segments:
            found = np.searchsorted(seg.terms, numbers)
            for i, (number, e) in enumerate(zip(numbers, found.tolist())):
                if number >= 0 and e < len(seg.terms) and seg.terms[e] == number:
                    pieces[i].append((seg, int(seg.starts[e]), int(seg.starts[e + 1]), e))
        return [_Held(p) for p in pieces]

    def rows_holding(self, term, visible):
        """The number of visible rows holding `term` (an index term)."""
        return self.frequencies([term], visible)[term]

    def frequencies(self, terms, visible):
        """{term: the number of visible rows holding it} for index terms."""
        terms = list(dict.fromkeys(terms))
        view = _View(self, visible)
        return {term: view.count(held) for term, held in zip(terms, self.held(terms))}

    def search(
        self, match, visible, lengths, n=RECALL_CANDIDATES, order=None, phrase_postings=None, prune=True, tokens=None
    ):
        """[(slot, bm25)] of the `n` best visible rows for `match` (a lexical.Match),
        best first: bm25 is negative, lower is better, as FTS5's; equal scores by
        `order` (an int array by slot: e.g. rowids) or else by slot.

        `visible` is a boolean mask over slots (live rows the request may read),
        `lengths` the rows' lengths in tokens by slot, as `add` gave them (FTS5's
        docsizes: the bounds that prune rest on them). A phrase of several terms
        needs `phrase_postings(words)` -> (slots, weighted frequencies) of every
        row holding it (the words as the match gives them); `prune=False` scores every matching row (for comparison);
        `tokens`, when the caller has it, the visible rows' total length."""
        phrases = [_phrase_terms(tuple(words)) for words in match.phrases()]
        words_of = dict(zip(reversed(phrases), reversed(match.phrases())))  # each phrase's first wording
        view = _View(self, visible)
        if not phrases or not view.rows or n < 1:
            return []
        distinct = list(dict.fromkeys(phrases))
        single = [p for p in distinct if len(p) == 1]
        held = dict(zip(single, self.held([p[0] for p in single])))
        for p in distinct:
            if len(p) != 1:
                if not p:  # FTS5 finds no token in it: it matches nothing
                    held[p] = _Held()
                elif phrase_postings is None:
                    raise ValueError(f"phrase {p!r} needs phrase_postings")
                else:
                    slots, frequencies = phrase_postings(words_of[p])
                    held[p] = _Held(slots=slots, frequencies=frequencies)
        lengths = np.asarray(lengths)
        if tokens is None:
            tokens = int(np.sum(lengths[: view.size], where=view.visible))
        counts = {p: view.count(held[p]) for p in distinct}
        if not tokens and any(counts.values()):
            raise fts_damaged(ZERO_LENGTHS)
        avgdl = float(tokens) / float(view.rows)
        weights = {p: idf(view.rows, counts[p]) for p in distinct}
        scorer = _Scorer(phrases, held, weights, lengths, avgdl)
        required, any_of, excluded = (
            list(dict.fromkeys(_phrase_terms(tuple(w)) for w in part))
            for part in (match.required, match.any_of, match.excluded)
        )
        if required:
            slots, scores = _all_of(required, excluded, view, scorer)
        elif prune:
            slots, scores = _max_score(any_of, excluded, view, scorer, n)
        else:
            slots, scores = _every(any_of, excluded, view, scorer)
        bm25 = -1.0 * scores
        ties = slots if order is None else np.asarray(order)[slots]
        best = np.lexsort((ties, bm25))[:n]
        return [(int(slots[i]), float(bm25[i])) for i in best]

    # -- comparing -------------------------------------------------------------------

    def _live_postings(self, ids, live):
        """(term text rank, chunk id, units) of every posting of a live slot, sorted."""
        terms = self.vocabulary.in_order()
        rank = np.empty(len(terms), dtype=np.int64)
        rank[np.argsort(np.array(terms, dtype=object))] = np.arange(len(terms))
        parts = [seg.postings() for seg in self.segments] or [(np.zeros(0, np.int64),) * 3]
        term, slot, units = (np.concatenate(column) for column in zip(*parts))
        keep = live[slot]
        term, chunk, units = rank[term[keep]], ids[slot[keep]], units[keep]
        order = np.lexsort((chunk, term))
        return terms, rank, term[order], chunk[order], units[order]

    def contents(self, ids, live):
        """{term: {chunk id: weighted frequency}} of the live slots (`ids` and `live`
        by slot): what a fresh build of the same rows holds, whatever its slots."""
        terms, rank, term, chunk, units = self._live_postings(ids, live)
        by_rank = dict(zip(rank.tolist(), terms))
        found = {}
        for t, c, u in zip(term.tolist(), chunk.tolist(), units.tolist()):
            found.setdefault(by_rank[t], {})[c] = u / UNIT
        return found

    def digest(self, ids, live):
        """A hash of `contents`, computed in bulk. Terms are numbered among those a
        live posting holds: a forgotten memory's words stay in the vocabulary (a
        state followed since its snapshot) and must not move the others' numbers."""
        terms, rank, term, chunk, units = self._live_postings(ids, live)
        digest = xxhash.xxh64()
        by_rank = sorted(terms)
        used = np.unique(term)
        digest.update("\0".join(by_rank[r] for r in used.tolist()).encode("utf-8", "surrogatepass"))
        for column in (np.searchsorted(used, term), chunk, units):
            digest.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
        return digest.hexdigest()

    # -- memory ----------------------------------------------------------------------

    def postings_count(self):
        return sum(len(seg) for seg in self.segments)

    def nbytes(self):
        """Bytes held by the arrays (the term dictionary not counted)."""
        return sum(a.nbytes for seg in self.segments for a in seg.arrays().values())

    def to_arrays(self):
        """{name: numpy array}: everything, for from_arrays."""
        # the terms one a line (FTS5's tokens never hold a line break), and their hashes
        arrays = {
            "size": np.array([self.size], np.int64),
            **self.vocabulary.to_arrays(),
            "blocks": np.array([seg.block for seg in self.segments], np.int64),
        }
        for i, seg in enumerate(self.segments):
            arrays.update({f"{i}.{name}": array for name, array in seg.arrays().items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays):
        postings = cls()
        postings.size = int(arrays["size"][0])
        postings.vocabulary = Terms.from_arrays(arrays)
        postings.segments = [
            _Segment(int(block), **{name: arrays[f"{i}.{name}"] for name in _Segment.ARRAYS})
            for i, block in enumerate(arrays["blocks"].tolist())
        ]
        return postings


def _merge(a, b):
    """One segment from two of the same block, `b`'s slots after `a`'s: each term's
    postings in `a`, then those in `b`."""
    terms = np.union1d(a.terms, b.terms)
    in_a, in_b = np.searchsorted(terms, a.terms), np.searchsorted(terms, b.terms)
    count_a, count_b = np.zeros(len(terms), np.int64), np.zeros(len(terms), np.int64)
    count_a[in_a], count_b[in_b] = np.diff(a.starts), np.diff(b.starts)
    starts = np.concatenate(([0], np.cumsum(count_a + count_b)))
    to_a = np.arange(len(a)) + np.repeat(starts[in_a] - a.starts[:-1], np.diff(a.starts))
    to_b = np.arange(len(b)) + np.repeat(starts[in_b] + count_a[in_b] - b.starts[:-1], np.diff(b.starts))
    low, units = np.empty(len(a) + len(b), np.uint16), np.empty(len(a) + len(b), np.uint8)
    low[to_a], low[to_b], units[to_a], units[to_b] = a.low, b.low, a.units, b.units
    wide_at = np.concatenate((to_a[a.wide_at], to_b[b.wide_at]))
    order = np.argsort(wide_at)
    peak, shortest = np.zeros(len(terms), np.uint32), np.full(len(terms), np.iinfo(np.int32).max, np.int32)
    peak[in_a], shortest[in_a] = a.peak, a.shortest
    peak[in_b], shortest[in_b] = np.maximum(peak[in_b], b.peak), np.minimum(shortest[in_b], b.shortest)
    return _Segment(
        a.block,
        terms=terms.astype(np.int32),
        starts=starts,
        low=low,
        units=units,
        wide_at=wide_at[order],
        wide_units=np.concatenate((a.wide_units, b.wide_units))[order],
        peak=peak,
        shortest=shortest,
    )


def _batches(slots):
    """(start, end) of runs of at most BATCH of `slots`, none across a block."""
    cuts = np.flatnonzero(np.diff(slots >> BLOCK_BITS)) + 1
    bounds = [0, *cuts.tolist(), len(slots)]
    return [(at, min(at + BATCH, end)) for start, end in zip(bounds, bounds[1:]) for at in range(start, end, BATCH)]


class _View:
    """The visible rows of a request, as statistics count them."""

    def __init__(self, postings, visible):
        visible = np.asarray(visible, dtype=bool)
        if len(visible) < postings.size:
            raise ValueError(f"visible covers {len(visible)} slots, not every one of {postings.size}")
        self.visible = visible
        self.rows = int(np.count_nonzero(visible))
        self.size = len(visible)
        self._hidden = None

    @property
    def hidden(self):
        """Slots not visible, ascending."""
        if self._hidden is None:
            self._hidden = np.flatnonzero(~self.visible)
        return self._hidden

    def count(self, held):
        """How many visible rows hold it."""
        if held.given:
            return int(np.count_nonzero(self.visible[held.slots()]))
        if not held.count or not len(self.hidden):
            return held.count
        if len(self.hidden) * 8 < held.count:
            return held.count - held.count_in(self.hidden)
        return int(np.count_nonzero(self.visible[held.slots()]))

    def keep(self, slots):
        return slots[self.visible[slots]]


class _Scorer:
    """Exact scores of rows, phrase by phrase in the query's order."""

    def __init__(self, phrases, held, idf, lengths, avgdl):
        self.phrases, self.held, self.idf, self.lengths, self.avgdl = phrases, held, idf, lengths, avgdl
        self.times = {}
        for p in phrases:
            self.times[p] = self.times.get(p, 0) + 1

    def scores(self, slots, absent=()):
        """bm25 (positive) of sorted `slots`, none of which holds a phrase in `absent`."""
        length = self.lengths[slots].astype(np.float64)
        frequency = {p: self.held[p].lookup(slots) for p in self.times if p not in absent}
        score = np.zeros(len(slots))
        for p in self.phrases:
            if p in frequency:
                # as fts5_aux.c: idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)))
                score += self.idf[p] * saturation(frequency[p], length, self.avgdl)
        return score

    def bound(self, p):
        """A bound on the score phrase `p` adds to any row."""
        peaks = self.held[p].peaks(self.lengths)
        if not peaks:
            return 0.0
        each = max(self.idf[p] * saturation(f, d, self.avgdl) for f, d in peaks)
        return self.times[p] * each * (1 + SLACK)


def _without(slots, excluded, scorer):
    """`slots` holding no phrase of `excluded`."""
    for p in excluded:
        if len(slots):
            slots = slots[scorer.held[p].lookup(slots) == 0]
    return slots


def _all_of(required, excluded, view, scorer):
    """Rows holding every required phrase (and, so, one of any_of) and no excluded one."""
    required = sorted(required, key=lambda p: scorer.held[p].count)
    slots = view.keep(scorer.held[required[0]].slots())
    for p in required[1:]:
        if len(slots):
            slots = slots[scorer.held[p].lookup(slots) > 0]
    slots = _without(slots, excluded, scorer)
    return slots, scorer.scores(slots, absent=set(excluded))


def _every(any_of, excluded, view, scorer):
    """Every matching row, scored."""
    lists = [scorer.held[p].slots() for p in any_of]
    slots = view.keep(np.unique(np.concatenate(lists))) if lists else np.zeros(0, np.int64)
    slots = _without(slots, excluded, scorer)
    return slots, scorer.scores(slots, absent=set(excluded))


def _max_score(any_of, excluded, view, scorer, n):
    """The matching rows that can be among the `n` best, scored, by MaxScore.

    Phrases are taken in falling order of their bound, each one's rows given the
    partial score it adds (a lower bound of their score), until the bounds of the
    phrases left sum to less than the n-th best partial score: a row holding only
    those cannot be among the best, so their (long) lists are not read in full.
    The rows read are then narrowed phrase by phrase, each remaining phrase looked
    up for the rows its bound and theirs still leave in reach of the n-th best;
    those left are scored exactly."""
    held, times, idf = scorer.held, scorer.times, scorer.idf
    bound = {p: scorer.bound(p) for p in any_of}
    ordered = sorted(any_of, key=lambda p: (-bound[p], held[p].count))
    rest = [*np.cumsum([bound[p] for p in ordered][::-1])[::-1].tolist(), 0.0]  # rows holding only ordered[i:]
    blocked = ~view.visible[: view.size]
    for p in excluded:
        blocked[held[p].slots()] = True
    partial, seen = np.zeros(view.size), np.zeros(view.size, dtype=bool)

    def add(p, slots, frequencies):
        partial[slots] += (
            times[p] * idf[p] * saturation(frequencies, scorer.lengths[slots].astype(np.float64), scorer.avgdl)
        )

    def best(candidates):
        """The `n` of distinct `candidates` with the highest partial scores, and the
        n-th of those (less a margin): the best are at least that."""
        if len(candidates) < n:
            return candidates, 0.0
        at = np.argpartition(partial[candidates], len(candidates) - n)[len(candidates) - n :]
        return candidates[at], float(partial[candidates[at]].min()) * (1 - SLACK)

    read, threshold, top = 0, 0.0, np.zeros(0, np.int64)
    for p in ordered:
        if read and rest[read] < threshold:
            break
        slots = held[p].slots()
        open_ = ~blocked[slots]
        slots = slots[open_]
        add(p, slots, held[p].frequencies()[open_])
        seen[slots] = True
        read += 1
        # the best so far among the rows scored before and those this phrase added to
        elsewhere = (
            top[slots[np.minimum(np.searchsorted(slots, top), max(len(slots) - 1, 0))] != top] if len(slots) else top
        )
        top, threshold = best(np.concatenate((elsewhere, slots)))
    # every row read, ascending: those `seen` marks (a pass over a bit per slot, where
    # sorting them costs a tenth of a search when common words hold hundreds of thousands)
    candidates = np.flatnonzero(seen)
    for i in range(read, len(ordered) + 1):
        candidates = candidates[(partial[candidates] + rest[i]) * (1 + SLACK) >= threshold]
        if i == len(ordered) or not len(candidates):
            break
        p = ordered[i]
        if held[p].count < 16 * len(candidates):  # reading its list costs less than looking each row up
            seen[:] = False
            seen[candidates] = True
            slots = held[p].slots()
            hit = seen[slots]
            add(p, slots[hit], held[p].frequencies()[hit])
        else:
            frequencies = held[p].lookup(candidates)
            hit = frequencies > 0
            add(p, candidates[hit], frequencies[hit])
        threshold = max(threshold, best(candidates)[1])
    return candidates, scorer.scores(candidates, absent=set(excluded))
