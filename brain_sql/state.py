"""The read state: what recall keeps in memory for one brain file, one copy per
file per process, shared by every connection and thread. Its parts:

- the chunk index (chunk_index.py): each chunk's filter columns, length and int8
  vector: the filters and the vector leg;
- the entity graph (entity_graph.py): entities, chunks and their ties, the names
  a query can name, and the graph leg's walk;
- the lexical postings (postings.py): each term's chunks, for the lexical leg;
- the follower (follower.py): it builds the parts from SQL and applies the change
  log to them.

A state is loaded from the brain's snapshot (snapshot.py) or built at first use,
then follows writes. SQLite stays the single source of truth: everything here is
rebuilt from it, and `fingerprint` compares a followed state with a fresh build.
"""

import contextlib
import os
import threading
import time
import weakref

from . import copies, follower, snapshot
from .chunk_index import ChunkIndex
from .config import SNAPSHOT_BEHIND_AT_START, SNAPSHOT_EVERY, SNAPSHOT_MIN_CHUNKS, SNAPSHOT_QUIET_SECONDS
from .connection import main_file, open_connection
from .entity_graph import EntityGraph
from .follower import REBUILD_SHARE, last_change
from .postings import Postings
from .schema import recorded_model_and_dimension

MIN_COMPACT_SLOTS = 1000  # a smaller state is never worth compacting
WRITE_ROOM = 1024  # rows a state readied for writes has room for at least (a full one doubles)


class Overtaken(Exception):
    """A snapshot given up: the state changed while it was written."""


class ReadState:
    """The in-memory state of one brain. Read it under `lock` (shared); `refresh`
    takes it exclusively while it applies changes."""

    def __init__(self, dimension):
        self.lock = _SharedLock()
        # one refresh (or swap of a compacted copy) at a time: what a refresh reads
        # under the shared lock stays true until it puts it in place
        self.refreshing = threading.Lock()
        self.seq = None  # the last change applied (None: the brain has no change log)
        self.last = None  # that change's (kind, key, stamp): a file copied over this one says otherwise
        self.instance = None  # the brain's own id (brain_instance), kept by copies of it
        self.built = False
        self.compacting = False  # a copy without dead slots is being built aside
        self.token = None  # without a change log: the file's state when built
        self.version = 0  # bumped by every change, for caches keyed on the state
        self.dimension = dimension
        self.chunks = ChunkIndex(dimension)
        self.graph = EntityGraph()
        self.graph.slot_of = self.chunks.slot_of
        self.postings = Postings()
        self.saved = None  # the change its snapshot holds
        self.saving = False
        self.outdated = False  # loaded from a snapshot of an earlier format

    # -- building and following ------------------------------------------------

    def build(self, conn):
        """Read everything from the brain on `conn` (a fresh state)."""
        return follower.build(self, conn)

    def refresh(self, conn, fetched=None):
        """Bring the state up to what `conn` sees (or to what `fetched`, follower.fetch's
        answer, holds); True when it must be built anew."""
        return follower.follow(self, conn, fetched)

    def _apply(self, conn, fetched):
        follower.apply(self, conn, fetched)

    def garbage(self):
        """The share of slots that removed rows left behind; past REBUILD_SHARE a
        rebuild compacts them (its cost is then in proportion to the writes)."""
        dead, used = self.graph.garbage()
        dead, used = dead + self.chunks.dead(), used + self.chunks.size
        return dead / used if used > MIN_COMPACT_SLOTS else 0.0

    # -- persisting ----------------------------------------------------------------

    def save(self, path, brain=None):
        """Write this state's snapshot to `path`, readable as the file `brain` is;
        returns the change it holds. Takes the shared lock itself, for its parts'
        arrays and then for each piece written, so a refresh meanwhile waits for a
        piece, not the file; a save that a refresh overtakes gives up (Overtaken)."""
        with self.lock:
            version, seq = self.version, self.seq
            manifest = {
                "instance": self.instance,
                "seq": self.seq,
                "last": self.last,
                "dimension": self.dimension,
                "chunks": self.chunks.meta(),
                "graph": self.graph.meta(),
            }
            postings = {f"postings.{name}": array for name, array in self.postings.to_arrays().items()}
            arrays = {**self.chunks.to_arrays(), **self.graph.to_arrays(), **postings}

        @contextlib.contextmanager
        def unchanged():
            with self.lock:
                if self.version != version:
                    raise Overtaken(f"the state changed while {path} was written")
                yield

        snapshot.save(path, manifest, arrays, like=brain, hold=unchanged)
        return seq

    @classmethod
    def load(cls, path, dimension, hold=None, lost=None):
        """The state a snapshot holds; SnapshotError when it cannot be used. With
        `hold` and `lost` (the lock of the state it is to become, and what drops that
        state), its arrays may map the file (snapshot.load)."""
        manifest, arrays = snapshot.load(path, hold, lost)
        if manifest.get("dimension") != dimension or manifest.get("seq") is None:
            raise snapshot.SnapshotError(f"{path} holds another model's state, or one without a change log")
        state = cls(dimension)
        try:
            state.chunks = ChunkIndex.from_arrays(dimension, arrays, manifest["chunks"])
            state.graph = EntityGraph.from_arrays(arrays, manifest["graph"])
            state.postings = Postings.from_arrays(
                {
                    name.removeprefix("postings."): array
                    for name, array in arrays.items()
                    if name.startswith("postings.")
                }
            )
        except (KeyError, TypeError, ValueError) as ex:
            raise snapshot.SnapshotError(f"{path} is damaged: {ex}") from ex
        state.graph.slot_of = state.chunks.slot_of
        state.outdated = manifest["format"] != snapshot.FORMAT  # saved anew as soon as it is worth it
        state.instance, state.seq = manifest["instance"], manifest["seq"]
        state.last = tuple(manifest["last"]) if manifest["last"] else None
        state.built = True
        return state

    def digest(self):
        """A hash of what the state holds, equal for states holding the same; cheap
        enough for a million memories (check compares a snapshot with a build by it)."""
        with self.lock:
            live = self.chunks.rows.live
            ids = self.chunks.rows.id
            return self.chunks.digest() + self.graph.digest(self.graph.chunks.id) + self.postings.digest(ids, live)

    def fingerprint(self):
        """What the state holds, independent of slot order: equal for a followed
        state and a fresh build of the same brain. Takes the shared lock itself."""
        with self.lock:
            columns, vectors, signs = self.chunks.fingerprint()
            postings = self.postings.contents(self.chunks.rows.id, self.chunks.rows.live)
            return {
                "columns": columns,
                "vectors": vectors,
                "signs": signs,
                "postings": postings,
                **self.graph.fingerprint(self.graph.chunks.id),
            }


def snapshot_problem(conn, dimension):
    """What is wrong with the brain's snapshot, in words, or None: it cannot be
    read, is another brain's, is too far behind the change log to be followed, or
    followed to now holds other than a fresh build. None without one."""
    key = _file_key(conn)
    where = snapshot.path_for(key[0]) if key else None
    if where is None or not os.path.lexists(where):
        return None
    try:
        loaded = ReadState.load(where, dimension)
    except snapshot.SnapshotError as ex:
        return str(ex)
    seq, instance, _ = last_change(conn)
    if loaded.instance != instance:
        return f"{where} is another brain's (its instance id differs)"
    if loaded.refresh(conn):
        return (
            None  # older than the change log reaches: not wrong, only not used (the next ingest or server writes anew)
        )
    if loaded.digest() != ReadState(dimension).build(conn).digest():
        return f"{where} does not hold what the brain holds"
    return None


def rewrite_snapshot(conn, dimension):
    """Replace the brain's snapshot with one of a fresh build, or remove it when
    the brain is too small for one; what stands in the way, in words, or None."""
    key = _file_key(conn)
    if key is None:
        return None
    where = snapshot.path_for(key[0])
    fresh = ReadState(dimension).build(conn)
    try:
        if fresh.chunks.count >= SNAPSHOT_MIN_CHUNKS:
            fresh.save(where, key[0])
        elif os.path.lexists(where):
            os.unlink(where)
    except OSError as ex:
        return f"{where} could not be replaced ({ex}): move it away"
    return None


class _SharedLock:
    """Many readers, or one writer (a refresh); a waiting writer goes before the
    readers who come after it, so refreshes are never starved. A reader may take
    it again inside its own hold (the legs hold it while the lexical statistics
    take it for themselves)."""

    def __init__(self):
        self._condition = threading.Condition()
        self._readers = 0
        self._writers = 0  # waiting or writing
        self._held = threading.local()  # this thread's depth of shared holds

    def __enter__(self):
        depth = getattr(self._held, "depth", 0)
        if not depth:
            with self._condition:
                self._condition.wait_for(lambda: not self._writers)
                self._readers += 1
        self._held.depth = depth + 1

    def __exit__(self, *exc):
        self._held.depth -= 1
        if not self._held.depth:
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


_states: dict[tuple[str, int, int], "ReadState"] = {}  # the brain file (_file_key) -> its read state
_states_lock = threading.Lock()


def _file_key(conn):
    """The brain file behind `conn` (its path and inode), or None for an in-memory one."""
    path = main_file(conn)
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


# the last state built for a connection inside a transaction, with what it saw there (the connection,
# the change log's position, its changes: a view no other transaction has), for its next recalls
_transaction_state: list = [None]


def current(conn, dimension):
    """The read state of the brain on `conn`, up to date with what `conn` sees.
    Use it under its shared lock: `with state.lock: ...`. A state not built yet is
    loaded from the brain's snapshot when one fits, else built from SQL. On a
    replica whose follower is replaying changes after a restart, ReplicaNotReady:
    what it would read could mix transactions, and would stay in the state."""
    key = _file_key(conn)
    if key:
        copies.ensure_ready(key[0])
    with _states_lock:
        state = _states.get(key) if key else None
        if state is None or state.dimension != dimension:
            state = ReadState(dimension)
            if key:
                _states[key] = state
    seq, instance, stamp = last_change(conn)
    if conn.in_transaction:
        # what this connection sees may never be committed (and a rolled-back change
        # log reuses its numbers): it must not reach the shared state. The shared one
        # serves only where it holds exactly what the transaction sees (its snapshot,
        # nothing written in it); else a state of its own, as the SQL legs would read,
        # kept for the transaction's next recalls until it writes
        if _holds(state, seq, instance, stamp):
            return state
        seen = (id(conn), dimension, seq, instance, stamp, conn.total_changes)
        with _states_lock:
            kept = _transaction_state[0]
        if kept is None or kept[0] != seen:
            kept = (seen, ReadState(dimension).build(conn))
            with _states_lock:
                _transaction_state[0] = kept
        return kept[1]
    with _states_lock:
        if _transaction_state[0] is not None and _transaction_state[0][0][0] == id(conn):
            _transaction_state[0] = None  # its transaction is over: its state goes
    token = _file_token(key[0]) if key and seq is None else None
    if _holds(state, seq, instance, stamp):
        return state  # the common case: nothing written since
    with state.refreshing:
        if _holds(state, seq, instance, stamp):
            return state  # another reader's refresh brought it here while this one waited
        fetched = None
        if state.built and seq is not None:
            with state.lock:  # the change log and its rows read beside the readers
                fetched = follower.fetch(state, conn)
            if fetched is False:
                return state
        with state.lock.exclusive():
            compact, save = _bring_up(state, conn, key, dimension, (seq, instance, token), fetched)
    if compact:
        threading.Thread(target=_compact, args=(state, key[0], dimension), name="brain-compact", daemon=True).start()
    elif save:
        state.saving = True
        threading.Thread(target=_save_when_quiet, args=(state, key[0]), name="brain-snapshot", daemon=True).start()
    return state


def _bring_up(state, conn, key, dimension, seen, fetched):
    """Under the exclusive lock: load, follow or build `state` up to what `conn` sees
    (`seen`: its change-log position, instance and file token; `fetched`: what
    follower.fetch read for it, or None); returns (whether to compact it aside,
    whether to save its snapshot)."""
    seq, instance, token = seen
    if state.built and seq is None and token == state.token:
        return False, False
    if not state.built and seq is not None and key:
        held = weakref.ref(state)  # the snapshot's lease watcher must not keep a state put aside alive
        loaded = _from_snapshot(
            conn, key[0], dimension, instance, hold=lambda: _lock_of(held), lost=lambda: _drop(held)
        )
        if loaded is not None:
            loaded, saved = loaded
            _replace(state, loaded, token)
            # the position the file holds, before the changes followed since (none: of another format)
            state.saved = None if loaded.outdated else saved
    try:
        stale = not state.built or seq is None or state.refresh(conn, fetched)
    except BaseException:
        state.built = False  # half applied: the next reader builds it anew
        raise
    compact = False
    if stale:
        _replace(state, ReadState(dimension).build(conn), token)
    elif state.garbage() > REBUILD_SHARE and not state.compacting:
        # current, but full of dead slots: a copy without them is built aside,
        # while readers go on with this one
        state.compacting = compact = bool(key)
    return compact, bool(key) and seq is not None and _worth_saving(state)


def _holds(state, seq, instance, stamp):
    """Whether `state` holds the brain at the change-log position `seq` (with that
    change's `stamp`) of brain `instance`."""
    return (
        state.built
        and seq is not None
        and (seq, instance) == (state.seq, state.instance)
        and (not seq or (state.last is not None and stamp == state.last[2]))
    )


def prepare_for_writes(conn, dimension):
    """Make the read state of the brain on `conn` ready for its first write, beside
    the readers: room in every column and the graph's document index. A snapshot
    holds both (room for SNAPSHOT_ROOM_SHARE of its rows more); one saved before
    format 7 holds neither, and its first write would make them (two CPU seconds at a
    million chunks) while every recall asking after that write waited. A
    snapshot found SNAPSHOT_BEHIND_AT_START changes behind is saved anew once quiet."""
    state = current(conn, dimension)
    with state.refreshing:
        with state.lock:
            rooms = [(slots, slots.room(WRITE_ROOM)) for slots, _ in follower.columns(state)]
            state.graph.document_index  # noqa: B018 - made now, on first use
        if any(room is not None for _, room in rooms):
            with state.lock.exclusive():
                for slots, room in rooms:
                    slots.take(room)
    key = _file_key(conn)
    if key and _worth_saving(state, SNAPSHOT_BEHIND_AT_START):
        # a snapshot this far behind costs every start the changes followed since (seconds
        # at a million): the server writes it anew at its first quiet moment
        state.saving = True
        threading.Thread(target=_save_when_quiet, args=(state, key[0]), name="brain-snapshot", daemon=True).start()


def _from_snapshot(conn, path, dimension, instance, hold, lost):
    """(the state the brain's snapshot holds, brought up to what `conn` sees, the
    change-log position the snapshot held); None when there is none that fits
    (another brain's, damaged, or too far behind). `hold`, `lost`: the shared lock
    of the state it is to be put in, and what drops that state (ReadState.load)."""
    where = snapshot.path_for(path)
    if not os.path.lexists(where):
        return None
    try:
        loaded = ReadState.load(where, dimension, hold, lost)
    except snapshot.SnapshotError:
        return None
    saved = loaded.seq
    if loaded.instance != instance or loaded.refresh(conn):
        return None
    return loaded, saved


def _lock_of(held):
    """The shared lock of the state `held` (a weak reference) names; none to take
    when it is gone: nothing writes to the arrays of a state put aside."""
    state = held()
    return contextlib.nullcontext() if state is None else state.lock


def _drop(held):
    """Drop what the state `held` names holds: the snapshot it maps was written by
    another process after the system took this one's lease away (snapshot.Lease).
    The next reader builds it anew, from SQL or a snapshot that verifies."""
    state = held()
    if state is None:
        return
    with state.lock.exclusive():
        state.built = False


def _worth_saving(state, every=None):
    """Whether the brain is big enough for a snapshot to beat a build, and this
    state holds enough it has not saved (`every` changes; SNAPSHOT_EVERY)."""
    if state.saving or state.chunks.count < SNAPSHOT_MIN_CHUNKS:
        return False
    return state.saved is None or state.seq - state.saved >= (every or SNAPSHOT_EVERY)


def _save_when_quiet(state, path):
    """Save the snapshot once no write has landed for SNAPSHOT_QUIET_SECONDS; a write
    while it is written gives it up, to wait for the next quiet."""
    try:
        while True:
            seen = state.seq
            time.sleep(SNAPSHOT_QUIET_SECONDS)
            if state.seq != seen:
                continue
            if state.saved == state.seq:
                break  # saved meanwhile (an ingest's persist): nothing left to write
            try:
                state.saved = state.save(snapshot.path_for(path), path)
                break
            except Overtaken:
                continue
    except OSError:  # a folder it may not write, a full disk: the snapshot only saves time
        pass
    finally:
        state.saving = False


def persist(conn):
    """Bring the snapshot of the brain on `conn` up to date now (at the end of an
    ingest), when the brain is big enough for one to pay and the snapshot is
    SNAPSHOT_EVERY changes or more behind (a server follows a smaller gap
    itself); returns whether it was written."""
    due = _snapshot_due(conn)
    if due is None:
        return False
    key, where, _ = due
    state = current(conn, recorded_model_and_dimension(conn)[1])
    try:
        state.saved = state.save(where, key[0])
    except (OSError, Overtaken):  # another thread's write overtook it: the next ingest or a server saves it
        return False
    return True


def _snapshot_due(conn):
    """(file key, snapshot path, whether the snapshot there is this brain's: loaded and
    followed rather than built anew) when persist would write the snapshot of the brain
    on `conn`; else None."""
    key = _file_key(conn)
    seq, instance, _ = last_change(conn)
    if key is None or seq is None:
        return None
    where, loadable = snapshot.path_for(key[0]), False
    try:
        manifest, _ = snapshot.read_manifest(where)
        loadable = manifest.get("instance") == instance
        if loadable and 0 <= seq - (manifest.get("seq") or 0) < SNAPSHOT_EVERY:
            return None
    except snapshot.SnapshotError:
        pass
    if conn.execute("select count(*) from knowledge").fetchone()[0] < SNAPSHOT_MIN_CHUNKS:
        return None
    return key, where, loadable


def persist_ahead(conn):
    """Start the postings of the state persist will build (follower.postings_ahead:
    in a second process, while an ingest does its mention work) when it will build
    it from SQL: a snapshot is due and there is none of this brain to load, nor a
    state of it in this process."""
    due = _snapshot_due(conn)
    if due is None:
        return
    key, _, loadable = due
    with _states_lock:
        held = _states.get(key)
    if (held is None or not held.built) and not loadable:
        follower.postings_ahead(conn)


def drop_ahead(conn):
    """Stop the postings persist_ahead started that no build took."""
    follower.drop_ahead(conn)


def _replace(state, fresh, token):
    """Put `fresh` in place of what `state` holds (under its exclusive lock)."""
    fresh.version, fresh.token = state.version + 1, token
    state.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("lock", "refreshing", "saving")})


def _compact(state, path, dimension):
    """Build `state` anew on a connection of its own while readers go on; then, under
    the lock, bring the copy up to the writes made meanwhile and swap it in."""
    try:
        conn = open_connection(path, read_only=True)
        try:
            fresh = ReadState(dimension).build(conn)
            with state.refreshing, state.lock.exclusive():
                if state.built and fresh.instance == state.instance and not fresh.refresh(conn):
                    _replace(state, fresh, state.token)
        finally:
            conn.close()
    finally:
        with state.lock.exclusive():
            state.compacting = False
