"""The follower: it reads the brain's rows into the read state's parts (state.py)
— every row (`build`), or only the rows the change log names since the state
last looked (`follow`), re-read and put in place of what the parts held, so a
small write costs work in proportion to the write.

Triggers log which chunk, entity, edge and document each write touched
(brain_changes, in the writer's own transaction). A state follows while the log
reaches back to where it stopped and names less than REBUILD_SHARE of the brain;
otherwise, or after a repair that says anything may have changed, it is built anew.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np

from . import snapshot
from .chunk_index import StoredVectors
from .config import vector_codes_enabled
from .connection import main_file, may_begin, open_connection
from .errors import BrainError
from .postings import Postings
from .schema import CHANGES_TABLE, INSTANCE_TABLE
from .vectors import vec_metadata_values, vector_rows

REBUILD_SHARE = 0.25  # apply the log while it names fewer rows than this share of the brain
# vectors of fewer chunks than this, or than a tenth of the brain's, are read one by one;
# more, in one scan (at a million chunks a scan reads a row in 3.4 us, a key 9-30 us)
POINT_READS = 2000
POINT_READ_SHARE = 10
# each chunk: its id, document, filter columns, FTS5 docsize and the columns FTS5 indexes
CHUNK_ROWS = (
    f"select k.id, k.document_id, {vec_metadata_values('k')}, d.sz, k.title, k.content, k.context "
    "from knowledge k left join knowledge_fts_docsize d on d.id = k.id"
)
TEXTS = 3  # title, content, context: the last columns of CHUNK_ROWS
CHUNK_ROWS_WITHOUT_TEXT = CHUNK_ROWS.replace(", k.title, k.content, k.context", "")
POSTINGS_FILE = snapshot.TEMPORARY + "postings-"  # the second process's file: swept as a snapshot's leftover
PR_SET_PDEATHSIG = 1  # prctl's option: the signal a process gets when its parent ends
PARALLEL_BUILD_CHUNKS = (
    200_000  # a brain this big builds its postings in a second process (smaller: not worth its start)
)


def build(state, conn):
    """Read everything from the brain on `conn` into a fresh state, a batch of rows
    at a time, inside one read transaction (every part sees the same rows).

    A big brain's postings are built beside the rest by a second process
    (`python -m brain_sql.follower`), which reads the same rows in its own read
    transaction: a machine's second core halves the build. One started ahead
    (`postings_ahead`: an ingest's, before its mention work) is taken instead. Its
    work is taken only if it read the chunks the build reads: at the same change-log
    position, or at an earlier one of this brain's history with no chunk changed
    since; else the postings are built here."""
    path = main_file(conn)
    began = may_begin(conn)  # else the caller's transaction, or the statement calling a function, holds one
    if began:
        conn.execute("begin")
    try:
        seq, state.instance, _ = last_change(conn)
        count = conn.execute("select count(*) from knowledge").fetchone()[0]
        beside = _take_ahead(path) if began else None  # a transaction of the caller's may hold rows of its own
        if beside is None and path and seq is not None and count >= PARALLEL_BUILD_CHUNKS:
            beside = _postings_beside(path)
        graph = state.graph
        for rows in _batches(conn.execute("select id, name, entity_type from entities order by id")):
            graph.put_entities(rows)
        for rows in _batches(conn.execute("select document_id, entity_id from documents")):
            graph.set_documents(_ids(rows, "documents", ENTITY_OF))
        vectors = _stored_vectors(conn, state.dimension)
        rows_sql = CHUNK_ROWS_WITHOUT_TEXT if beside else CHUNK_ROWS
        for rows in _batches(conn.execute(rows_sql + " order by k.id")):
            put_chunks(state, rows, vectors, texts=not beside)
        del vectors
        if vector_codes_enabled():
            state.chunks.make_codes()
        for rows in _batches(
            conn.execute(
                "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships order by id"
            )
        ):
            graph.put_edges(_ids(rows, "relationships", EDGE_IDS))
        graph.names.merge()
        graph.index_ties()
        if beside:
            state.postings = beside.result(conn, seq, state.instance, state.chunks.size) or _postings_here(conn)
        state.last = _entry(conn, seq) if seq else None
    finally:
        if began:
            conn.execute("commit")
    state.seq, state.built = seq, True
    state.version += 1
    return state


def put_chunks(state, rows, vectors, texts=True, prepared=None):
    """Chunks as CHUNK_ROWS reads them, with their vectors (a StoredVectors), into
    every part: new slots in the chunk index, nodes in the graph, postings (unless
    `texts` is False: rows of CHUNK_ROWS_WITHOUT_TEXT, their postings built apart;
    `prepared`: Postings.prepare's work on their texts, done beforehand)."""
    meta = (lambda row: row[2:-TEXTS]) if texts else (lambda row: row[2:])
    slots = state.chunks.add([(row[0], *meta(row)) for row in rows], vectors)
    state.graph.add_chunks(slots, [row[0] for row in rows], [row[1] for row in rows])
    if texts:
        state.postings.add(slots, [row[-TEXTS:] for row in rows], prepared)


class _Beside:
    """The postings build running in a second process, and the file it writes."""

    def __init__(self, process, out):
        self.process, self.out = process, out

    def result(self, conn, seq, instance, size):
        """Its Postings, when it read the rows the build on `conn` reads (at the
        change-log position `seq` of brain `instance`, `size` chunks): at
        `seq`, or at an earlier change of this brain's history with no chunk changed
        since; its change's entry (kind, key, stamp) must be the log's at its
        position. Else None."""
        try:
            if self.process.wait() != 0:
                return None
            manifest, arrays = snapshot.load(self.out)
            read = manifest.get("seq")
            if manifest.get("rows") != size or not isinstance(read, int) or read > seq:
                return None
            if manifest.get("instance") != instance:
                return None
            if _entry(conn, read) != tuple(manifest.get("entry") or ()) or not _chunks_unchanged(conn, read, seq):
                return None
            return Postings.from_arrays(arrays)
        except (OSError, snapshot.SnapshotError):
            return None
        finally:
            self.cancel()

    def cancel(self):
        """Stop the process (when it still runs) and remove its file."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if os.path.exists(self.out):
            os.unlink(self.out)


def _chunks_unchanged(conn, since, seq):
    """Whether no chunk changed after the change-log position `since` up to `seq`, as
    the log tells while it holds every change in between: it still reaches back to
    `since`, and none is missing (each committed change takes the next number)."""
    between = f"from {CHANGES_TABLE} where seq > ?1 and seq <= ?2"
    first, held, changed = conn.execute(
        f"select (select min(seq) from {CHANGES_TABLE}), (select count(*) {between}), "
        f"exists(select 1 {between} and kind in ('chunk', 'all'))",
        (since, seq),
    ).fetchone()
    return first is not None and first <= since + 1 and held == seq - since and not changed


_ahead: dict[str, _Beside] = {}  # brain file -> the _Beside postings_ahead started for its next build
_ahead_lock = threading.Lock()


def postings_ahead(conn):
    """Start building the postings of the brain on `conn` in a second process now,
    for the build of its state asked for next (state.persist's, after an ingest's
    mention work, which changes no chunk): the two cores overlap them."""
    path = main_file(conn)
    beside = _postings_beside(path) if path else None
    if beside is not None:
        with _ahead_lock:
            beside, _ahead[path] = _ahead.get(path), beside
    if beside is not None:
        beside.cancel()


def _take_ahead(path):
    with _ahead_lock:
        return _ahead.pop(path, None) if path else None


def drop_ahead(conn):
    """Stop a postings_ahead build no build took (the ingest failed, or wrote no snapshot)."""
    beside = _take_ahead(main_file(conn))
    if beside is not None:
        beside.cancel()


def _postings_beside(path):
    """Start building the postings of the brain at `path` in a second process, which
    ends with this one. Its file is named as a snapshot's temporary one: left by a
    process killed before it read it, the next snapshot saved there removes it."""
    out = None
    try:
        handle, out = tempfile.mkstemp(prefix=POSTINGS_FILE, dir=os.path.dirname(os.path.abspath(path)))
        os.close(handle)
        process = subprocess.Popen(
            [sys.executable, "-m", "brain_sql.follower", path, out, str(os.getpid())],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        if out is not None and os.path.exists(out):
            os.unlink(out)
        return None
    return _Beside(process, out)


def _postings_here(conn):
    """The postings of every chunk, at slots in their order by id, built here."""
    postings = Postings()
    at = 0
    for rows in _batches(conn.execute("select title, content, context from knowledge order by id")):
        postings.add(np.arange(at, at + len(rows)), rows)
        at += len(rows)
    return postings


def _build_postings(path, out):
    """The second process's work: the postings of the brain at `path`, written to
    `out` with the change-log position (and that change) and the number of rows
    they were read at."""
    conn = open_connection(path, read_only=True)
    conn.execute("begin")
    seq, instance, _ = last_change(conn)
    entry = _entry(conn, seq) if seq else None
    postings = _postings_here(conn)
    rows = conn.execute("select count(*) from knowledge").fetchone()[0]
    conn.execute("commit")
    manifest = {"seq": seq, "instance": instance, "entry": list(entry) if entry else None, "rows": rows}
    snapshot.save(out, manifest, postings.to_arrays())


def _end_with(parent):
    """Make this process end when `parent` (its pid) does: Linux's parent-death signal."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (AttributeError, OSError):  # not Linux: the parent's drop_ahead stops it, when it can
        return
    if os.getppid() != parent:  # it ended before the signal was asked for
        os._exit(1)


class Fetched:
    """What a refresh reads beside the readers, under the shared lock, before it takes
    the exclusive one: the change log's entries since the state's position and the
    rows they name, so that readers wait only while these are put in place."""

    def __init__(self, seq, last, changed, rows):
        self.seq, self.last, self.changed = seq, last, changed
        self.rows = rows  # {kind: {id: row}} of the ids `changed` names; chunks' with their vectors
        self.rooms = []  # (Slots, room made for the rows to come)
        self.postings = None  # Postings.prepare's work on the named chunks' texts

    def known(self, kind, ids):
        """The rows of `ids` read here ({id: row}, the missing ones gone from the brain),
        or None when some were not asked for (the caller reads them all)."""
        return self.rows[kind] if kind in self.rows and set(ids) <= self.changed.get(kind, set()) else None


def fetch(state, conn):
    """What the change log holds since `state` last looked (a Fetched); True when the
    state must be built anew, False when nothing changed. Only reads the state (call
    it under the shared lock, one refresh at a time)."""
    seq, instance, stamp = last_change(conn)
    if instance != state.instance:
        return True  # another brain copied over this file
    if seq == state.seq:  # nothing new; or a copy restored and written again to the same position
        return bool(seq) and (state.last is None or stamp != state.last[2])
    if seq is None or state.seq is None or seq < state.seq:
        return True  # no log, or another file at this path
    first = conn.execute(f"select min(seq) from {CHANGES_TABLE}").fetchone()[0]
    if first is None or first > state.seq + 1:
        return True  # the log no longer reaches back to us
    if state.seq and _entry(conn, state.seq) != state.last:
        return True  # another file now, whose log says other things
    changed = {}
    for kind, key in conn.execute(
        f"select kind, key from {CHANGES_TABLE} where seq > ? and seq <= ?", (state.seq, seq)
    ):
        changed.setdefault(kind, set()).add(key)
    size = state.chunks.count + len(state.graph.node_of_entity)
    if "all" in changed or sum(map(len, changed.values())) > REBUILD_SHARE * max(size, 1000):
        return True  # a repair says anything may have changed, or too much did
    rows = {}
    for kind, sql in ROWS.items():
        ids = sorted(changed.get(kind, ()))
        rows[kind] = _rows_by_id(conn, sql, ids) if ids else {}
    chunks = sorted(changed.get("chunk", ()))
    rows["vectors"] = _stored_vectors(conn, state.dimension, chunks) if chunks else None
    fetched = Fetched(seq, _entry(conn, seq), changed, rows)
    if changed.get("document") or changed.get("chunk"):
        state.graph.document_index  # noqa: B018 - made here, beside the readers, on the first write after a load
    # their texts tokenized for the slots they will take (the chunk index's next ones)
    present = [rows["chunk"][i][-TEXTS:] for i in chunks if i in rows["chunk"]]
    fetched.postings = state.postings.prepare(state.chunks.rows.size, present) if present else None
    # room in the columns these changes add rows to (twice what they name: a rare
    # write that adds more grows a column while readers wait, as before)
    for slots, kinds in columns(state):
        named = sum(len(changed.get(kind, ())) for kind in kinds)
        fetched.rooms.append((slots, slots.room(2 * named + 64) if named else None))
    return fetched


def columns(state):
    """Each part's growable columns (Slots), with the kinds of change that add rows to them."""
    graph = state.graph
    signs = [] if state.chunks.signs is None else [(state.chunks.signs.rows, ("chunk",))]
    return [
        (state.chunks.rows, ("chunk",)),
        *signs,
        (graph.nodes, ("chunk", "entity")),
        (graph.chunks, ("chunk",)),
        (graph.documents, ("document",)),
        (graph.ties, ("chunk", "document", "entity", "edge")),
        (graph.edges, ("edge",)),
    ]


def follow(state, conn, fetched=None):
    """Bring the state up to what `conn` sees, or to what `fetched` (a Fetched read
    just before, or True / False as fetch says) holds; True when it must be built anew."""
    fetched = fetch(state, conn) if fetched is None else fetched
    if not isinstance(fetched, Fetched):
        return fetched
    for slots, room in fetched.rooms:
        slots.take(room)
    state._apply(conn, fetched)
    state.seq, state.last = fetched.seq, fetched.last
    state.version += 1
    return False


def apply(state, conn, fetched):
    """Put the rows `fetched` names in place of what the state held for them, reading
    those it did not read (the chunks of a document whose entity changed, their edges)."""
    graph, changed = state.graph, fetched.changed
    arrived = set()
    if changed.get("entity"):
        ids = sorted(changed["entity"])
        rows = fetched.known("entity", ids)
        rows = _rows_by_id(conn, ROWS["entity"], ids) if rows is None else rows
        for entity_id in ids:
            if entity_id not in rows:
                graph.drop_entity(entity_id)
        arrived = {i for i in rows if i not in graph.node_of_entity}
        graph.put_entities([rows[i] for i in ids if i in rows])
    documents = set(changed.get("document", ()))
    if documents:
        rows = fetched.known("document", documents)
        rows = _rows_by_id(conn, ROWS["document"], sorted(documents)) if rows is None else rows
        found = dict(_ids([rows[i] for i in documents if i in rows], "documents", ENTITY_OF))
        graph.set_documents((document_id, found.get(document_id)) for document_id in documents)
    if arrived:  # an entity back under its id: its documents' chunks tie to it again
        documents |= graph.documents_of_entities(arrived)
    # a document's entity ties all its chunks
    chunk_ids = set(changed.get("chunk", ())) | graph.chunks_of_documents(documents)
    if chunk_ids:
        ids = sorted(chunk_ids)
        rows, prepared = fetched.known("chunk", ids), fetched.postings
        if rows is None:
            rows, vectors = _rows_by_id(conn, ROWS["chunk"], ids), _stored_vectors(conn, state.dimension, ids)
            prepared = None  # made for other rows
        else:
            vectors = fetched.rows["vectors"]
        graph.drop_chunks(state.chunks.remove(ids))
        put_chunks(state, [rows[i] for i in ids if i in rows], vectors, prepared=prepared)
    edge_ids = set(changed.get("edge", ()))
    if arrived:  # edges waiting for an end that is back
        edge_ids |= graph.edges_waiting_for(arrived)
    if chunk_ids:  # a chunk written again has a new node: its edges follow
        edge_ids |= graph.edges_of_chunks(chunk_ids)
    if edge_ids:
        ids = sorted(edge_ids)
        rows = fetched.known("edge", ids)
        rows = _rows_by_id(conn, ROWS["edge"], ids) if rows is None else rows
        edges = _ids([rows[i] for i in ids if i in rows], "relationships", EDGE_IDS)
        for edge_id in ids:
            graph.drop_edge(edge_id)
        graph.put_edges(edges)
    graph.index_ties()


# each kind of change's rows, by the ids the change log names
ROWS = {
    "entity": "select id, name, entity_type from entities where id in ({})",
    "document": "select document_id, entity_id from documents where document_id in ({})",
    "chunk": CHUNK_ROWS + " where k.id in ({})",
    "edge": "select id, from_entity_id, to_entity_id, relation_type, knowledge_id from relationships where id in ({})",
}


# the columns of the rows read above that the graph's arrays hold as ids: {position: column}
ENTITY_OF = {1: "entity_id"}
EDGE_IDS = {1: "from_entity_id", 2: "to_entity_id", 4: "knowledge_id"}


def _ids(rows, table, columns):
    """`rows` of `table`, when their `columns` ({position: name}) hold ids (whole
    numbers) or NULL; else a BrainError naming the first that does not — plain SQL
    can write anything there, and the graph's arrays would crash on it, or, given
    2.5, quietly take 2 (check names such values, and its repair mends them)."""
    if all(type(row[at]) is int or row[at] is None for row in rows for at in columns):
        return rows
    for row in rows:
        for at, column in columns.items():
            if not (type(row[at]) is int or row[at] is None):
                shown = f"a BLOB of {len(row[at])} bytes" if isinstance(row[at], bytes) else repr(row[at])[:60]
                raise BrainError(f"{table} {row[0]} {column} holds {shown}, not an id: run sqlite-utils brain check")


def _batches(cursor, size=50_000):
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            return
        yield rows


def _chunks_about(conn):
    """About how many chunks the brain holds: its highest id (an index's last entry)."""
    return conn.execute("select coalesce(max(id), 0) from knowledge").fetchone()[0]


def _stored_vectors(conn, dimension, ids=None):
    """The StoredVectors of chunks `ids` (all when None): vec0 finds a few by key,
    many faster in one scan."""
    if ids is not None and len(ids) < max(POINT_READS, _chunks_about(conn) // POINT_READ_SHARE):
        batches = [vector_rows(conn, "embedding_int8", ids)]
    else:
        wanted = None if ids is None else set(ids)
        batches = (
            [row for row in rows if wanted is None or row[0] in wanted]
            for rows in _batches(conn.execute("select knowledge_id, embedding_int8 from vec_knowledge"))
        )
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
            rows = np.array(
                conn.execute(
                    f"{sql} where rowid in (select value from json_each(?))", [json.dumps(only.tolist())]
                ).fetchall(),
                dtype=np.int64,
            ).reshape(-1, 3)
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
    """The change at `seq`: its kind, key and random stamp (what tells this file's
    history from another's at the same position)."""
    row = conn.execute(f"select kind, key, stamp from {CHANGES_TABLE} where seq = ?", (seq,)).fetchone()
    return tuple(row) if row else None


def last_change(conn):
    """(the last change's seq, the brain's instance id, that change's stamp); seq
    None for a brain from before the change log, which cannot be followed."""
    try:
        return tuple(
            conn.execute(
                f"select (select coalesce(max(seq), 0) from {CHANGES_TABLE}), (select instance from {INSTANCE_TABLE}), "
                f"(select stamp from {CHANGES_TABLE} order by seq desc limit 1)"
            ).fetchone()
        )
    except Exception:  # noqa: BLE001 - no change log (or no instance yet, or no stamps): not followable
        return None, None, None


if __name__ == "__main__":  # the second process of a build: python -m brain_sql.follower BRAIN OUT PARENT
    if len(sys.argv) > 3:
        _end_with(int(sys.argv[3]))
    _build_postings(sys.argv[1], sys.argv[2])
