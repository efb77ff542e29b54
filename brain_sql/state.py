"""The read state: what recall keeps in memory for one brain file, one copy per
file per process, shared by every connection and thread. Its parts:

- the chunk index (chunk_index.py): each chunk's filter columns, length and int8
  vector: the filters and the vector leg;
- the entity graph (entity_graph.py): entities, chunks and their ties, the names
  a query can name, and the graph leg's walk;
- the follower (ReadState.refresh, below): it applies the change log.

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

from .chunk_index import ChunkIndex
from .connection import open_connection
from .entity_graph import EntityGraph
from .schema import CHANGES_TABLE, INSTANCE_TABLE
from .vectors import vec_metadata_values

REBUILD_SHARE = 0.25  # apply the log while it names fewer rows than this share of the brain
MIN_COMPACT_SLOTS = 1000  # a smaller state is never worth compacting
POINT_READS = 2000  # vectors of fewer chunks than this are read one by one; more, in one scan
CHUNK_ROWS = "select k.id, k.document_id, {}, d.sz from knowledge k left join knowledge_fts_docsize d on d.id = k.id"


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
        self.chunks = ChunkIndex(dimension)
        self.graph = EntityGraph()
        self.graph.slot_of = self.chunks.slot_of

    # -- building and following ------------------------------------------------

    def build(self, conn):
        """Read everything from the brain on `conn` (a fresh state)."""
        seq, self.instance = _last_change(conn)
        graph = self.graph
        graph.put_entities(conn.execute("select id, name, entity_type from entities order by id").fetchall())
        for document_id, entity_id in conn.execute("select document_id, entity_id from documents"):
            graph.set_document(document_id, entity_id)
        rows = conn.execute(CHUNK_ROWS.format(vec_metadata_values("k")) + " order by k.id").fetchall()
        vectors = dict(conn.execute("select knowledge_id, embedding_int8 from vec_knowledge").fetchall())
        self._put_chunks(rows, vectors, _positions(conn))
        graph.put_edges(conn.execute(
            "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships order by id"
        ).fetchall())  # fmt: skip
        graph.names.merge()
        graph.index_ties()
        self.seq, self.built = seq, True
        self.last = _entry(conn, seq) if seq else None
        self.version += 1
        return self

    def _put_chunks(self, rows, vectors, positions):
        """Chunks as (id, document_id, *filter columns, FTS5 docsize) rows, with
        their int8 vectors ({id: blob}) and where vec0 stores them."""
        slots = self.chunks.add([(row[0], *row[2:]) for row in rows], vectors, positions)
        self.graph.add_chunks(slots, [row[0] for row in rows], [row[1] for row in rows])

    def garbage(self):
        """The share of slots that removed rows left behind; past REBUILD_SHARE a
        rebuild compacts them (its cost is then in proportion to the writes)."""
        dead, used = self.graph.garbage()
        dead, used = dead + self.chunks.dead(), used + self.chunks.size
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
        size = self.chunks.count + len(self.graph.node_of_entity)
        if "all" in changed or sum(map(len, changed.values())) > REBUILD_SHARE * max(size, 1000):
            return True  # a repair says anything may have changed, or too much did
        self._apply(conn, changed)
        self.seq, self.last = seq, _entry(conn, seq)
        self.version += 1
        return False

    def _apply(self, conn, changed):
        """Re-read the rows the log names and replace what the state held for them."""
        graph = self.graph
        arrived = set()
        if changed.get("entity"):
            ids = sorted(changed["entity"])
            rows = _rows_by_id(conn, "select id, name, entity_type from entities where id in ({})", ids)
            for entity_id in ids:
                if entity_id not in rows:
                    graph.drop_entity(entity_id)
            arrived = {i for i in rows if i not in graph.node_of_entity}
            graph.put_entities([rows[i] for i in ids if i in rows])
        documents = set(changed.get("document", ()))
        if documents:
            found = dict(_rows_by_id(conn, "select document_id, entity_id from documents where document_id in ({})",
                                     sorted(documents)).values())  # fmt: skip
            for document_id in documents:
                graph.set_document(document_id, found.get(document_id))
        if arrived:  # an entity back under its id: its documents' chunks tie to it again
            documents |= graph.documents_of_entities(arrived)
        # a document's entity ties all its chunks
        chunk_ids = set(changed.get("chunk", ())) | graph.chunks_of_documents(documents)
        if chunk_ids:
            ids = sorted(chunk_ids)
            rows = _rows_by_id(conn, CHUNK_ROWS.format(vec_metadata_values("k")) + " where k.id in ({})", ids)
            vectors = _vectors(conn, ids)
            positions = _positions(conn, [i for i in ids if i in vectors])
            graph.drop_chunks(self.chunks.remove(ids))
            self._put_chunks([rows[i] for i in ids if i in rows], vectors, positions)
        edge_ids = set(changed.get("edge", ()))
        if arrived:  # edges waiting for an end that is back
            edge_ids |= graph.edges_waiting_for(arrived)
        if chunk_ids:  # a chunk written again has a new node: its edges follow
            edge_ids |= graph.edges_of_chunks(chunk_ids)
        if edge_ids:
            ids = sorted(edge_ids)
            rows = _rows_by_id(
                conn, "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships "
                "where id in ({})", ids,
            )  # fmt: skip
            for edge_id in ids:
                graph.drop_edge(edge_id)
            graph.put_edges([rows[i] for i in ids if i in rows])
        graph.index_ties()

    def fingerprint(self):
        """What the state holds, independent of slot order: equal for a followed
        state and a fresh build of the same brain. Takes the shared lock itself."""
        with self.lock:
            columns, vectors = self.chunks.fingerprint()
            return {"columns": columns, "vectors": vectors, **self.graph.fingerprint(self.graph.chunks.id)}


def _vectors(conn, ids):
    """{id: int8 blob} of chunks `ids`: vec0 finds a few by key, many faster in one scan."""
    if len(ids) < POINT_READS:
        found = {}
        for knowledge_id in ids:
            row = conn.execute("select embedding_int8 from vec_knowledge where knowledge_id = ?", (knowledge_id,)).fetchone()
            if row:
                found[knowledge_id] = row[0]
        return found
    wanted = set(ids)
    return {k: v for k, v in conn.execute("select knowledge_id, embedding_int8 from vec_knowledge") if k in wanted}


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
