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
import time

import numpy as np

from .chunk_index import ChunkIndex, StoredVectors
from .connection import open_connection
from .entity_graph import EntityGraph
from . import snapshot
from .config import SNAPSHOT_EVERY, SNAPSHOT_MIN_CHUNKS, SNAPSHOT_QUIET_SECONDS
from .schema import CHANGES_TABLE, INSTANCE_TABLE, recorded_model_and_dimension
from .vectors import vec_metadata_values, vector_rows

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
        self.saved = None  # the change its snapshot holds
        self.saving = False

    # -- building and following ------------------------------------------------

    def build(self, conn):
        """Read everything from the brain on `conn` (a fresh state), a batch of rows
        at a time."""
        seq, self.instance = _last_change(conn)
        graph = self.graph
        for rows in _batches(conn.execute("select id, name, entity_type from entities order by id")):
            graph.put_entities(rows)
        for rows in _batches(conn.execute("select document_id, entity_id from documents")):
            for document_id, entity_id in rows:
                graph.set_document(document_id, entity_id)
        vectors = _stored_vectors(conn, self.dimension)
        for rows in _batches(conn.execute(CHUNK_ROWS.format(vec_metadata_values("k")) + " order by k.id")):
            self._put_chunks(rows, vectors)
        del vectors
        for rows in _batches(conn.execute(
            "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships order by id"
        )):  # fmt: skip
            graph.put_edges(rows)
        graph.names.merge()
        graph.index_ties()
        self.seq, self.built = seq, True
        self.last = _entry(conn, seq) if seq else None
        self.version += 1
        return self

    def _put_chunks(self, rows, vectors):
        """Chunks as (id, document_id, *filter columns, FTS5 docsize) rows, with
        their vectors (a StoredVectors)."""
        slots = self.chunks.add([(row[0], *row[2:]) for row in rows], vectors)
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
            vectors = _stored_vectors(conn, self.dimension, ids)
            graph.drop_chunks(self.chunks.remove(ids))
            self._put_chunks([rows[i] for i in ids if i in rows], vectors)
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

    # -- persisting ----------------------------------------------------------------

    def save(self, path):
        """Write this state's snapshot to `path` (call it under the shared lock)."""
        manifest = {"instance": self.instance, "seq": self.seq, "last": self.last, "dimension": self.dimension,
                    "chunks": self.chunks.meta(), "graph": self.graph.meta()}  # fmt: skip
        snapshot.save(path, manifest, {**self.chunks.to_arrays(), **self.graph.to_arrays()})

    @classmethod
    def load(cls, path, dimension):
        """The state a snapshot holds; SnapshotError when it cannot be used."""
        manifest, arrays = snapshot.load(path)
        if manifest.get("dimension") != dimension or manifest.get("seq") is None:
            raise snapshot.SnapshotError(f"{path} holds another model's state, or one without a change log")
        state = cls(dimension)
        try:
            state.chunks = ChunkIndex.from_arrays(dimension, arrays, manifest["chunks"])
            state.graph = EntityGraph.from_arrays(arrays, manifest["graph"])
        except (KeyError, TypeError, ValueError) as ex:
            raise snapshot.SnapshotError(f"{path} is damaged: {ex}") from ex
        state.graph.slot_of = state.chunks.slot_of
        state.instance, state.seq = manifest["instance"], manifest["seq"]
        state.last = tuple(manifest["last"]) if manifest["last"] else None
        state.built = True
        return state

    def digest(self):
        """A hash of what the state holds, equal for states holding the same; cheap
        enough for a million memories (check compares a snapshot with a build by it)."""
        with self.lock:
            return self.chunks.digest() + self.graph.digest(self.graph.chunks.id)

    def fingerprint(self):
        """What the state holds, independent of slot order: equal for a followed
        state and a fresh build of the same brain. Takes the shared lock itself."""
        with self.lock:
            columns, vectors = self.chunks.fingerprint()
            return {"columns": columns, "vectors": vectors, **self.graph.fingerprint(self.graph.chunks.id)}


def snapshot_problem(conn, dimension):
    """What is wrong with the brain's snapshot, in words, or None: it cannot be
    read, is another brain's, is too far behind the change log to be followed, or
    followed to now holds other than a fresh build. None without one."""
    key = _file_key(conn)
    where = snapshot.path_for(key[0]) if key else None
    if where is None or not os.path.exists(where):
        return None
    try:
        loaded = ReadState.load(where, dimension)
    except snapshot.SnapshotError as ex:
        return str(ex)
    seq, instance = _last_change(conn)
    if loaded.instance != instance:
        return f"{where} is another brain's (its instance id differs)"
    if loaded.refresh(conn):
        return f"{where} is too far behind the change log to be followed"
    if loaded.digest() != ReadState(dimension).build(conn).digest():
        return f"{where} does not hold what the brain holds"
    return None


def rewrite_snapshot(conn, dimension):
    """Replace the brain's snapshot with one of a fresh build, or remove it when
    the brain is too small for one."""
    key = _file_key(conn)
    if key is None:
        return
    where = snapshot.path_for(key[0])
    fresh = ReadState(dimension).build(conn)
    if fresh.chunks.count >= SNAPSHOT_MIN_CHUNKS:
        fresh.save(where)
    elif os.path.exists(where):
        os.unlink(where)


def _batches(cursor, size=50_000):
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            return
        yield rows


def _stored_vectors(conn, dimension, ids=None):
    """The StoredVectors of chunks `ids` (all when None): vec0 finds a few by key,
    many faster in one scan."""
    if ids is not None and len(ids) < POINT_READS:
        batches = [vector_rows(conn, "embedding_int8", ids)]
    else:
        wanted = None if ids is None else set(ids)
        batches = ([row for row in rows if wanted is None or row[0] in wanted]
                   for rows in _batches(conn.execute("select knowledge_id, embedding_int8 from vec_knowledge")))  # fmt: skip
    found, matrices = [np.zeros(0, dtype=np.int64)], [np.zeros((0, dimension), dtype=np.int8)]
    for rows in batches:  # a batch's bytes at a time, never a million blobs at once
        found.append(np.array([i for i, _ in rows], dtype=np.int64))
        matrices.append(np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.int8).reshape(len(rows), dimension))
    found, matrix = np.concatenate(found), np.concatenate(matrices)
    del matrices
    chunk, offset = _positions(conn, found, None if ids is None else found)
    return StoredVectors(found, matrix, chunk, offset)


def _positions(conn, ids, only=None):
    """(vec0 chunk, offset in it) of each of `ids` — where vec0 stores each vector,
    which decides which of equal distances its KNN keeps. Read from its rowids
    table; if a sqlite-vec version lays that out otherwise, ids stand in (the
    append order)."""
    sql = "select rowid, chunk_id, chunk_offset from vec_knowledge_rowids"
    try:
        if only is None:
            rows = np.array(conn.execute(sql).fetchall(), dtype=np.int64).reshape(-1, 3)
        else:
            rows = np.array(conn.execute(f"{sql} where rowid in (select value from json_each(?))",
                                         [json.dumps(only.tolist())]).fetchall(), dtype=np.int64).reshape(-1, 3)  # fmt: skip
    except Exception:  # noqa: BLE001 - another layout: fall back as documented
        rows = np.zeros((0, 3), dtype=np.int64)
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    if not len(rows):
        return np.zeros(len(ids), dtype=np.int64), np.asarray(ids, dtype=np.int64)
    at = np.minimum(np.searchsorted(rows[:, 0], ids), len(rows) - 1)
    found = rows[at, 0] == ids
    return np.where(found, rows[at, 1], 0), np.where(found, rows[at, 2], ids)


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
    Use it under its shared lock: `with state.lock: ...`. A state not built yet is
    loaded from the brain's snapshot when one fits, else built from SQL."""
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
    compact = save = False
    with state.lock.exclusive():
        if state.built and seq is None and token == state.token:
            return state
        if not state.built and seq is not None and key:
            loaded = _from_snapshot(conn, key[0], dimension, instance)
            if loaded is not None:
                _replace(state, loaded, token)
                state.saved = state.seq
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
        save = bool(key) and seq is not None and _worth_saving(state)
    if compact:
        threading.Thread(target=_compact, args=(state, key[0], dimension), name="brain-compact", daemon=True).start()
    elif save:
        state.saving = True
        threading.Thread(target=_save_when_quiet, args=(state, key[0]), name="brain-snapshot", daemon=True).start()
    return state


def _from_snapshot(conn, path, dimension, instance):
    """The state the brain's snapshot holds, brought up to what `conn` sees; None
    when there is none that fits (another brain's, damaged, or too far behind)."""
    where = snapshot.path_for(path)
    if not os.path.exists(where):
        return None
    try:
        loaded = ReadState.load(where, dimension)
    except snapshot.SnapshotError:
        return None
    if loaded.instance != instance or loaded.refresh(conn):
        return None
    return loaded


def _worth_saving(state):
    """Whether the brain is big enough for a snapshot to beat a build, and this
    state holds enough it has not saved."""
    if state.saving or state.chunks.count < SNAPSHOT_MIN_CHUNKS:
        return False
    return state.saved is None or state.seq - state.saved >= SNAPSHOT_EVERY


def _save_when_quiet(state, path):
    """Save the snapshot once no write has landed for SNAPSHOT_QUIET_SECONDS: while
    it is written, changes wait to be applied."""
    try:
        while True:
            seen = state.seq
            time.sleep(SNAPSHOT_QUIET_SECONDS)
            if state.seq == seen:
                break
        with state.lock:
            saved = state.seq
            state.save(snapshot.path_for(path))
        state.saved = saved
    except OSError:  # a folder it may not write, a full disk: the snapshot only saves time
        pass
    finally:
        state.saving = False


def persist(conn):
    """Bring the snapshot of the brain on `conn` up to date now (at the end of an
    ingest), when the brain is big enough for one to pay and the snapshot is
    SNAPSHOT_EVERY changes or more behind (a server follows a smaller gap
    itself); returns whether it was written."""
    key = _file_key(conn)
    seq, instance = _last_change(conn)
    if key is None or seq is None:
        return False
    where = snapshot.path_for(key[0])
    try:
        manifest, _ = snapshot.read_manifest(where)
        if manifest.get("instance") == instance and 0 <= seq - (manifest.get("seq") or 0) < SNAPSHOT_EVERY:
            return False
    except snapshot.SnapshotError:
        pass
    if conn.execute("select count(*) from knowledge").fetchone()[0] < SNAPSHOT_MIN_CHUNKS:
        return False
    state = current(conn, recorded_model_and_dimension(conn)[1])
    with state.lock:
        saved = state.seq
        try:
            state.save(where)
        except OSError:
            return False
        state.saved = saved
    return True


def _replace(state, fresh, token):
    """Put `fresh` in place of what `state` holds (under its exclusive lock)."""
    fresh.version, fresh.token = state.version + 1, token
    state.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("lock", "saving")})


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
