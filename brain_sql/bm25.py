"""The lexical leg's scoring: BM25 over the rows a request can reach.

FTS5's bm25() takes its statistics — row count, average length, each phrase's
document frequency — from the whole index, hidden rows included, so a flagged or
out-of-scope row would move a visible row's score and tell of itself. Here the
same formula, FTS5's to the operation (k1 = 1.2, b = 0.75, column weights, each
phrase's idf floored at 1e-6), is computed from the index's own postings (a
phrase's occurrences in each row solved from FTS5's bm25 of it alone) with every
statistic counted over the reachable rows (a Reach) alone. With nothing hidden it is FTS5's bm25, to
the bit, so for a query of optional words FTS5 computes it then.

TermStats reads each term's postings once per query, for the common-word cut,
the quality estimate's idf weights and expansion as well as the scoring.
"""

import math
from fractions import Fraction

import numpy as np

from . import lexical
from . import reach as reachable
from .config import COMMON_TERM_SHARE, FTS_COLUMN_WEIGHTS, RECALL_CANDIDATES
from .postings import K1, ZERO_LENGTHS, B, idf, saturation
from .schema import fts_damaged, fts_lengths, fts_varints

FTS_COLUMNS = ("title", "content", "context")  # the columns FTS_COLUMN_WEIGHTS weigh, in order
_COLUMN_NUMBER = (
    "case col " + " ".join(f"when '{c}' then {i}" for i, c in enumerate(FTS_COLUMNS)) + f" else {len(FTS_COLUMNS)} end"
)
_COLUMN_WEIGHTS = np.array([*FTS_COLUMN_WEIGHTS, 1.0])  # by column number; 1.0 for any other column, as FTS5


def _grid(weights):
    """The grid every sum of `weights` lies on (a float is a binary fraction, so exactly)."""
    exact = [Fraction(w) for w in weights]
    return float(Fraction(math.gcd(*(f.numerator for f in exact)), math.lcm(*(f.denominator for f in exact))))


_GRID = _grid((*FTS_COLUMN_WEIGHTS, 1.0))  # weighted occurrences are rounded to it
if _GRID < 2**-10:
    raise ValueError("FTS_COLUMN_WEIGHTS must be multiples of 1/1024: occurrences are rounded to their grid")


def phrase_occurrences(conn, words, lengths_of=None, totals=None):
    """{row id: weighted occurrences} of the phrase `words` (its terms one after
    another in one column, each occurrence weighed by its column's FTS weight),
    for the rows `lengths_of(ids) -> (kept mask, their lengths in tokens)` keeps;
    without it, every row, its length read from knowledge_fts_docsize. `totals()`,
    inside a transaction: fts_totals, read once for a query's phrases.

    FTS5 finds the phrase from its doclists, in C: reading every instance of its
    terms through fts5vocab took 8 s for "of the" at a million memories. FTS5's
    bm25 of one phrase is idf * f(k1 + 1) / (f + k1(1 - b + b D / avgdl)), rising
    in f, the row's weighted occurrences: f is solved for, from its statistics
    (FTS5's own totals, read in the same snapshot as its scores, and each row's
    length), and rounded to the weights' grid, on which it lies, so it is exact.
    Scores that solve to no count on the grid are an index plain SQL damaged."""
    weights = ", ".join("?" * len(FTS_COLUMN_WEIGHTS))
    sql = f"select 1, rowid, bm25(knowledge_fts, {weights}) from knowledge_fts where knowledge_fts match ?"
    params = [*FTS_COLUMN_WEIGHTS, lexical.Match(any_of=(tuple(words),)).expression()]
    if conn.in_transaction:
        found = [row[1:] for row in conn.execute(sql, params)]
        rows, tokens = totals() if totals and found else fts_totals(conn) if found else (0, 0)
    else:
        # the scores and the totals in one statement, so of one snapshot (a commit between would move
        # both); never a transaction of its own: the caller's statement may be a write in progress
        read = conn.execute(f"select 0, block, null from knowledge_fts_data where id = 1 union all {sql}", params)
        found, recorded = [], None
        for kind, first, second in read:
            if kind:
                found.append((first, second))
            else:
                recorded = first
        rows, tokens = _recorded_totals(recorded) if found else (0, 0)
    if not found:
        return {}
    ids = np.array([row[0] for row in found], dtype=np.int64)
    scores = np.array([row[1] for row in found], dtype=np.float64)
    if lengths_of is None:
        kept, lengths = np.ones(len(ids), dtype=bool), np.array(_docsizes(conn, ids), dtype=np.float64)
    else:
        kept, lengths = lengths_of(ids)
    share = -scores[kept] / idf(rows, len(ids))  # f(k1 + 1) / (f + k), k as FTS5 computes it for the row
    k = K1 * (1 - B + B * np.asarray(lengths, dtype=np.float64) / (float(tokens) / float(rows)))
    steps = share * k / (K1 + 1.0 - share) / _GRID
    occurrences = np.round(steps)
    if not np.all(np.isfinite(steps) & (occurrences >= 1) & (np.abs(steps - occurrences) < 0.01)):
        raise fts_damaged("its bm25 of a phrase solves to no count of it: its totals or sizes disagree with its rows")
    return dict(zip(ids[kept].tolist(), (occurrences * _GRID).tolist()))


def fts_totals(conn):
    """(rows, tokens) of the whole full-text index, as FTS5's bm25 takes them: its
    averages record (a varint of rows, then one of tokens per column), which it
    writes at commit; inside a transaction, which may have written rows FTS5 counts
    but has not recorded yet, the sums of its docsize records."""
    if conn.in_transaction:
        sizes = conn.execute("select id, sz from knowledge_fts_docsize").fetchall()
        return len(sizes), sum(fts_lengths([i for i, _ in sizes], [size for _, size in sizes]))
    row = conn.execute("select block from knowledge_fts_data where id = 1").fetchone()
    return _recorded_totals(row[0] if row else None)


def _recorded_totals(block):
    """(rows, tokens) from FTS5's averages record (`block`: a varint of rows, then one
    of tokens per column): what it wrote at its last commit."""
    values = fts_varints(block) or []
    if len(values) < 2 or not values[0]:
        raise fts_damaged("its averages record, knowledge_fts_data row 1, is missing or empty")
    return values[0], sum(values[1:])


def _docsizes(conn, ids):
    """Each row's length in tokens, from knowledge_fts_docsize."""
    sizes = []
    for at in range(0, len(ids), 10_000):
        part = ids[at : at + 10_000].tolist()
        held = dict(
            conn.execute(
                f"select id, sz from knowledge_fts_docsize where id in ({', '.join('?' * len(part))})", part
            ).fetchall()
        )
        sizes.extend(fts_lengths(part, [held.get(i) for i in part]))
    return sizes


class StateIndex:
    """The read state's postings as one request sees them: counts and searches
    over the chunk slots in `visible`. It takes the state's shared lock for each
    read, so it may be used after the legs have let go of it."""

    def __init__(self, state, visible, conn):
        self.state, self.visible, self.conn = state, visible, conn

    def _visible(self):
        """The request's mask, as long as the postings now are (later slots: not its)."""
        size = self.state.postings.size
        if len(self.visible) >= size:
            return self.visible
        return np.concatenate([self.visible, np.zeros(size - len(self.visible), dtype=bool)])

    def counts(self, stems):
        """{stem: visible rows holding it}."""
        with self.state.lock:
            return self.state.postings.frequencies(list(stems), self._visible())

    def search(self, match, n):
        """[(id, bm25)] of the `n` best visible rows for `match`, as `search` answers."""
        state = self.state

        def lengths_of(ids):
            slots = state.chunks.slot_of.many(ids)
            kept = slots >= 0
            return kept, state.chunks.rows.length[slots[kept]]

        def phrase_postings(words):
            found = phrase_occurrences(self.conn, words, lengths_of)
            ids = np.array(sorted(found), dtype=np.int64)
            return state.chunks.slot_of.many(ids), np.array([found[i] for i in ids.tolist()], dtype=np.float64)

        with state.lock:
            rows = state.chunks.rows
            hits = state.postings.search(
                match,
                self._visible(),
                rows.length,
                n,
                order=rows.id,
                phrase_postings=phrase_postings,
                tokens=state.chunks.rows_in(self.visible)[2],  # kept: the reach read it
            )
            return [(int(rows.id[slot]), score) for slot, score in hits]


class TermStats:
    """Term statistics over one Reach, each read once per query: from the read
    state's postings (`index`, a StateIndex) when the request reads through it,
    exactly; else from the index's own tables in SQL, for a connection inside a
    transaction of its own."""

    def __init__(self, conn, reach, index=None):
        self.conn = conn
        self.reach = reach
        self.index = index
        self._postings = {}  # term or phrase -> (reach positions, weighted occurrences)
        self._rows = {}  # stem -> number of reachable rows holding it
        self._anywhere = {}  # stem -> number of rows holding it, hidden ones included (exact with an index)
        self._totals = None  # the full-text index's (rows, tokens), read once (_fts_totals)

    @property
    def documents(self):
        """The number of reachable rows (at least 1, so ratios are defined)."""
        return max(self.reach.count, 1)

    def postings(self, words):
        """(positions in the reach, weighted occurrences) of the reachable rows
        holding the phrase `words` (its terms one after another in one column),
        each occurrence weighted by its column's FTS weight."""
        terms = lexical.phrase_terms(words)
        if terms not in self._postings:
            if len(terms) == 1:
                # each occurrence as (doc, column number), summed here: faster than GROUP BY
                found = np.array(
                    self.conn.execute(
                        f"select doc, {_COLUMN_NUMBER} from knowledge_fts_vocab where term = cast(? as text)",
                        [lexical.term_bytes(terms[0])],
                    ).fetchall(),
                    dtype=np.int64,
                ).reshape(-1, 2)
                docs, each = np.unique(found[:, 0], return_inverse=True)
                weights = np.bincount(each, weights=_COLUMN_WEIGHTS[found[:, 1]], minlength=len(docs))
            else:  # several terms, or none (a phrase FTS5 finds no token in matches nothing)
                totals = phrase_occurrences(self.conn, words, self._lengths_of, self._fts_totals) if terms else {}
                docs = np.array(sorted(totals), dtype=np.int64)
                weights = np.array([totals[doc] for doc in docs.tolist()], dtype=np.float64)
            at = self.reach.positions(docs)
            self._postings[terms] = (at[at >= 0], weights[at >= 0])
        return self._postings[terms]

    def _fts_totals(self):
        """fts_totals, read once for the query (inside a transaction they are summed)."""
        if self._totals is None:
            self._totals = fts_totals(self.conn)
        return self._totals

    def _lengths_of(self, ids):
        """(which of `ids` are reachable, their lengths in tokens)."""
        at = self.reach.positions(ids)
        return at >= 0, self.reach.lengths[at[at >= 0]]

    def idf_bounds(self, stems):
        """{stem: (lowest, highest) idf it can have}, from counts over every row:
        without reading postings, enough to rule a stem out."""
        everywhere = self._everywhere(stems)
        hidden = 0 if self.index else self.reach.hidden  # an index's counts are the reach's already
        return {s: (self.idf_of(everywhere[s]), self.idf_of(max(0, everywhere[s] - hidden))) for s in stems}

    def _everywhere(self, stems):
        """{stem: rows holding it, hidden ones included}: a bound, never an answer."""
        unknown = sorted(set(stems) - self._anywhere.keys())
        if unknown and self.index:
            self._anywhere.update(self.index.counts(unknown))
            self._rows.update({stem: self._anywhere[stem] for stem in unknown})
        elif unknown:
            found = {}
            for stem in unknown:  # one by one: a term need not be UTF-8, which JSON cannot carry
                row = self.conn.execute(
                    "select doc from knowledge_fts_terms where term = cast(? as text)", [lexical.term_bytes(stem)]
                ).fetchone()
                found[stem] = row[0] if row else 0
            self._anywhere.update({stem: found.get(stem, 0) for stem in unknown})
        return self._anywhere

    def frequencies(self, words):
        """{stem: number of reachable rows holding it} for `words`."""
        stemmed = lexical.stems(words)
        everywhere = self._everywhere(stemmed.values())
        for word, stem in stemmed.items():
            if stem not in self._rows:
                if not everywhere[stem] or self.reach.complete:
                    self._rows[stem] = everywhere[stem]
                elif (stem,) in self._postings:
                    self._rows[stem] = len(self._postings[(stem,)][0])
                else:
                    self._rows[stem] = self._count((word,))
        return {stem: self._rows[stem] for stem in stemmed.values()}

    def _count(self, words):
        """Reachable rows matching the phrase `words` (row ids only: cheaper than postings)."""
        expression = lexical.Match(any_of=(words,)).expression()
        docs = np.array(
            [
                row[0]
                for row in self.conn.execute(
                    "select rowid from knowledge_fts where knowledge_fts match ?", [expression]
                )
            ],
            dtype=np.int64,
        )
        return int((self.reach.positions(docs) >= 0).sum())

    def rows(self, stem):
        """The reachable rows holding a stem frequencies() has counted."""
        return self._rows[stem]

    def idf_of(self, rows):
        """The idf of a stem `rows` of the reachable rows hold."""
        return math.log(1 + self.documents / (rows + 0.5))

    def idf(self, stem):
        """The idf of a stem frequencies() has counted."""
        return self.idf_of(self._rows[stem])

    def query_idf(self, text):
        """{stem: idf} of every searchable word of `text` (terms, phrases, compounds)."""
        spec = lexical.parse(text)
        words = spec.terms + [w for phrase in spec.phrases + spec.compounds for w in phrase]
        return {stem: self.idf(stem) for stem in sorted(set(self.frequencies(words)))}

    def rarity(self, text):
        """The mean idf of `text`'s searchable terms over the idf of a term no
        reachable row holds: near 0 for words most rows hold, 1 for words none
        does (and for a text with nothing to search)."""
        idf = self.query_idf(text)
        return sum(idf.values()) / len(idf) / self.idf_of(0) if idf else 1.0

    def share(self, text, held):
        """The idf-weighted share of `text`'s searchable terms (query_idf's) among
        the index terms `held`: 0 when it has none."""
        idf = self.query_idf(text)
        total = sum(idf.values())
        return sum(idf[term] for term in idf if term in held) / total if total else 0.0

    def common_words(self, text):
        """The query's words (single ones, and those of its phrases and code paths)
        found in more than COMMON_TERM_SHARE of the reachable rows; only words whose
        count over every row leaves it open are counted."""
        spec = lexical.parse(text)
        stemmed = lexical.stems(
            spec.terms
            + [w for words in spec.phrases + spec.exclusions + spec.compounds if len(words) > 1 for w in words]
        )
        limit = COMMON_TERM_SHARE * self.documents
        everywhere = self._everywhere(stemmed.values())
        hidden = 0 if self.index else self.reach.hidden
        surely = {word for word, stem in stemmed.items() if everywhere[stem] - hidden > limit}
        maybe = [word for word, stem in stemmed.items() if everywhere[stem] > limit and word not in surely]
        frequencies = self.frequencies(maybe)
        return frozenset(w.lower() for w in [*surely, *maybe] if w in surely or frequencies[stemmed[w]] > limit)


def for_request(conn, filters):
    """The TermStats of a request with `filters`: over the read state's postings,
    or from SQL on a connection inside a transaction of its own (which may see rows
    the state does not)."""
    if conn.in_transaction:
        return TermStats(conn, reachable.of(conn, filters))
    state = reachable.state_of(conn)
    with state.lock:
        visible = state.chunks.visible(filters)
        return TermStats(conn, reachable.in_state(state, visible), StateIndex(state, visible, conn))


def search(stats, match, n=RECALL_CANDIDATES):
    """[(id, bm25)] of the `n` best reachable rows for `match` (a lexical.Match),
    best first, equal scores by id; bm25 is negative, lower is better, as FTS5's."""
    if stats.index:
        return stats.index.search(match, n) if match.phrases() else []
    reach = stats.reach
    phrases = match.phrases()
    if not phrases or not reach.count:
        return []
    if reach.complete and not match.required and not match.excluded:
        # FTS5's statistics are the reach's: its bm25 is this one, and faster. Not
        # with AND or NOT: there FTS5 may leave out instances of a phrase that the
        # row holds (an earlier row holding a required phrase's words apart is enough)
        weights = ", ".join("?" * len(FTS_COLUMN_WEIGHTS))
        return [
            tuple(row)
            for row in stats.conn.execute(
                f"select rowid, bm25(knowledge_fts, {weights}) as score from knowledge_fts where knowledge_fts match ? "
                "order by score, rowid limit ?",
                [*FTS_COLUMN_WEIGHTS, match.expression(), n],
            )
        ]
    postings = {phrase: stats.postings(phrase) for phrase in set(phrases)}

    def holds(phrase):
        held = np.zeros(reach.count, dtype=bool)
        held[postings[phrase][0]] = True
        return held

    matched = np.zeros(reach.count, dtype=bool)
    for phrase in match.any_of:
        matched |= holds(phrase)
    for phrase in match.required:
        matched &= holds(phrase)
    for phrase in match.excluded:
        matched &= ~holds(phrase)
    rows = np.flatnonzero(matched)
    if not len(rows):
        return []
    if not reach.tokens:
        raise fts_damaged(ZERO_LENGTHS)
    # as fts5_aux.c computes it, operation for operation
    avgdl = float(reach.tokens) / float(reach.count)
    length = reach.lengths[rows].astype(np.float64)
    score = np.zeros(len(rows))
    for phrase in phrases:
        at, weight = postings[phrase]
        frequency = np.zeros(reach.count)
        frequency[at] = weight
        frequency = frequency[rows]
        score += idf(reach.count, len(at)) * saturation(frequency, length, avgdl)
    bm25 = -1.0 * score
    ids = reach.ids[rows]
    order = np.lexsort((ids, bm25))[:n]
    return [(int(ids[i]), float(bm25[i])) for i in order]
