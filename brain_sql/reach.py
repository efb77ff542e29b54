"""The rows a request can reach — live rows its filters admit — as lexical
statistics count them: each one's id and length in tokens.

BM25's row count, average length and document frequencies, and every term
statistic behind the quality estimate, are taken over these rows alone, so a row
the request cannot see (flagged, expired, in another scope, filtered out) moves
nothing it is told.
"""

import numpy as np

from . import state as read_state
from .schema import fts_lengths, recorded_model_and_dimension


class Reach:
    """Reachable rows: ids ascending, with their lengths in tokens, out of `total`
    rows in the index (None: unknown). `complete` when they are all of them:
    FTS5's own statistics are then theirs. The ids are sorted when first asked for:
    a request the read state's postings answer only counts them."""

    def __init__(self, ids, lengths, total=None, tokens=None):
        self._ids, self._lengths = np.asarray(ids, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
        self._sorted = False
        self.count = len(self._ids)
        self.tokens = int(self._lengths.sum()) if tokens is None else tokens
        self.total = self.count if total is None else total
        self.complete = self.count == total
        self.hidden = self.total - self.count

    def _sort(self):
        if not self._sorted:
            order = np.argsort(self._ids, kind="stable")  # a state holds its chunks nearly in id order
            self._ids, self._lengths, self._sorted = self._ids[order], self._lengths[order], True

    @property
    def ids(self):
        self._sort()
        return self._ids

    @property
    def lengths(self):
        self._sort()
        return self._lengths

    def positions(self, ids):
        """Each of `ids` (an int array) as its index here, or -1 when it is not reachable."""
        if not self.count:
            return np.full(len(ids), -1)
        at = np.minimum(np.searchsorted(self.ids, ids), self.count - 1)
        return np.where(self.ids[at] == ids, at, -1)


def in_state(state, visible):
    """The Reach of the chunk slots in `visible`, from the read state (under its lock)."""
    ids, lengths, tokens = state.chunks.rows_in(visible)
    return Reach(ids, lengths, total=state.chunks.count, tokens=tokens)


def of(conn, filters):
    """The Reach of `filters` on `conn`'s brain: from the shared read state, or
    from SQL for a connection inside a transaction of its own, which may see rows
    the state does not."""
    if not conn.in_transaction:
        state = state_of(conn)
        with state.lock:
            return in_state(state, state.chunks.visible(filters))
    condition, params = filters.sql("k")
    rows = conn.execute(
        f"select k.id, d.sz from knowledge k left join knowledge_fts_docsize d on d.id = k.id where {condition}", params
    ).fetchall()
    every = conn.execute("select count(*) from knowledge").fetchone()[0]
    ids = [row[0] for row in rows]
    return Reach(ids, fts_lengths(ids, [row[1] for row in rows]), total=every)


def state_of(conn):
    """The read state of `conn`'s brain, up to date."""
    return read_state.current(conn, recorded_model_and_dimension(conn)[1])
