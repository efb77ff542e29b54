"""Opening SQLite connections and writing through them: the driver choice,
sqlite-vec loading, the pragmas, and the one transaction helper every write uses."""

import contextlib
import functools
import importlib
import os
import random
import re
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import sqlite_utils

from . import copies
from .config import INGEST_PAUSE_SECONDS, INGEST_POLL_SECONDS, WRITER_POLL_SECONDS, busy_timeout_ms
from .errors import RULE_MARK, BrainBusy, BrainError, InputError, ReadOnlyBrain, RuleRefused, WriteError


def _sqlite3_module():
    # The same choice sqlite-utils and Datasette make: pysqlite3 when installed,
    # because it can load extensions where many Python builds cannot.
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return importlib.import_module("sqlite3")


sqlite3 = _sqlite3_module()


def _itself(value):
    return value


# sqlite3 looks for an adapter for every parameter that is not an int, float or
# str; for None and bytes it finds none only after failed attribute lookups, 1.2
# and 1.6 microseconds a value in pysqlite3 (60 times an int's), and a new chunk
# binds some twenty Nones. Each registered as its own adapter, the lookup is one
# dict hit, and what is bound is the same (NULL, the BLOB).
for _type in (type(None), bytes):
    if (_type, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(_type, _itself)

if TYPE_CHECKING:  # the type the annotations name: pysqlite3's connections have the standard library's interface
    from sqlite3 import Connection
else:
    Connection = sqlite3.Connection


def load_sqlite_vec(conn):
    """Load sqlite-vec into `conn` unless it is there, or fail saying what to install."""
    try:
        conn.execute("select vec_version()")
        return
    except Exception:  # no such function, as any driver's OperationalError says
        pass
    try:
        import sqlite_vec
    except ImportError as ex:
        raise BrainError("sqlite-vec is not installed: pip install sqlite-vec") from ex
    if not hasattr(conn, "enable_load_extension"):
        raise BrainError(
            "this Python's sqlite3 cannot load extensions, so sqlite-vec cannot be "
            "loaded: pip install pysqlite3-binary (Linux), or use a Python built "
            "with --enable-loadable-sqlite-extensions"
        )
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
    except Exception as ex:
        raise BrainError(
            f"sqlite-vec could not be loaded ({ex}): pip install --force-reinstall "
            "sqlite-vec, and on Linux pip install pysqlite3-binary"
        ) from ex
    finally:
        conn.enable_load_extension(False)


def is_busy(error):
    """Whether an SQLite error means another connection holds a lock."""
    return getattr(error, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or (
        "database is locked" in str(error)
    )


# SQLite's words for a statement beyond its limits (sqlite3.c: tables in a join,
# compound terms, expression depth, LIKE pattern, variables, parser stack, columns,
# function arguments): the shape of what was asked, never a damaged file
_LIMITS = (
    "tables in a join",
    "too many terms in compound SELECT",
    "Expression tree is too large",
    "pattern too complex",
    "too many SQL variables",
    "parser stack overflow",
    "too many columns",
    "too many arguments on function",
    "too many FROM clause terms",
)


def beyond_limits(error):
    """Whether an SQLite error means a statement beyond SQLite's limits (its size, not the file)."""
    name = getattr(error, "sqlite_errorname", "")
    return name.startswith("SQLITE_TOOBIG") or any(words in str(error) for words in _LIMITS)


def cannot_write(error):
    """Whether an SQLite error means the file, its folder or its filesystem is read-only."""
    name = getattr(error, "sqlite_errorname", "")
    return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")) or any(
        words in str(error) for words in ("readonly database", "unable to open database file")
    )


# Statements a connection keeps prepared. pysqlite3's cache (100 by default), once
# full, drops the statement added last to make room for the next: after a new
# brain's migrations (some 240 statements, each run once) filled it, every
# statement ingest runs again and again was compiled anew, with its tables'
# triggers, each time it ran (tens of microseconds each, for every document).
# Room for every statement the brain runs, each of a fixed shape (no SQL text is
# made per document), so the cache never fills.
STATEMENTS_KEPT = 1000


def _connect(path, mode=None):
    options = {"isolation_level": None, "check_same_thread": False, "cached_statements": STATEMENTS_KEPT}
    if mode is None:
        return sqlite3.connect(str(path), **options)
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?{mode}", uri=True, **options)


def _wal(conn):
    """Switch to WAL. While another process creates the file in rollback mode the
    switch can fail at once as busy, its busy handler never called: it is tried
    again until the busy timeout has passed."""
    deadline = time.monotonic() + busy_timeout_ms() / 1000
    while True:
        try:
            conn.execute("pragma journal_mode = wal")
            return
        except sqlite3.OperationalError as ex:
            if not is_busy(ex) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_calling = threading.local()  # the connections a brain_* SQL function is running under, on this thread


@contextlib.contextmanager
def in_statement(conn):
    """While a brain_* SQL function runs on `conn`: the statement that called it
    holds the connection's snapshot, and a transaction begun under it would take
    that statement in (a write in progress cannot commit, and stays uncommitted)."""
    held = _calling.__dict__.setdefault("conns", [])
    held.append(id(conn))
    try:
        yield
    finally:
        held.pop()


def may_begin(conn: "Connection") -> bool:
    """Whether `conn` may begin a read transaction of its own: it is in none, and no
    statement of its is calling a brain_* function (reads under one are of its snapshot)."""
    return not conn.in_transaction and id(conn) not in getattr(_calling, "conns", ())


def open_connection(path: str | os.PathLike[str], read_only: bool = False) -> Connection:
    """A connection to the file at `path` in autocommit mode, with sqlite-vec loaded
    and the pragmas a brain is written and read with; `read_only` opens it for
    reading only, changing nothing about the file. A file that cannot be written
    (read-only, or on a read-only filesystem) is opened for reading: recall works,
    and a write says the file is read-only. A file that is not an SQLite database
    (or is damaged past opening) is a BrainError naming it. A copy Litestream
    follows is only ever read, and read so that it sees each change the follower
    writes (copies.py): never immutable, which would not."""
    _a_file(path)
    copy = copies.is_copy(path)
    modes: list[str | None]
    if copy:
        modes = ["mode=ro"]
    else:
        modes = ["mode=ro", "immutable=1"] if read_only else [None, "mode=ro", "immutable=1"]
    for mode in modes:
        try:
            conn = _connect(path, mode)
        except sqlite3.OperationalError as ex:  # a file that cannot be made or opened: no database yet
            raise _unopenable(path, ex) from ex
        try:
            conn.execute(f"pragma busy_timeout = {busy_timeout_ms()}")  # first: WAL waits for a writer making the file
            if mode is None:
                _wal(conn)
            conn.execute("pragma synchronous = normal")
            if copy:
                copies.prepare_reader(conn)
            else:
                conn.execute("pragma cache_size = -64000")  # 64 MB: vec0 rewrites chunk blobs
            conn.execute("pragma temp_store = memory")
            conn.execute("select count(*) from sqlite_master").fetchone()  # a read-only WAL file may fail only here
            break
        except UnicodeDecodeError as ex:  # SQLite's message quoted a damaged schema's bytes (review 102)
            conn.close()
            raise opening_fault(path, sqlite3.DatabaseError(f"malformed database schema ({ex.reason})")) from ex
        except sqlite3.DatabaseError as ex:
            conn.close()
            if cannot_write(ex) and mode != modes[-1] and not is_busy(ex):
                continue  # read it as it is: without a -shm file when the folder is read-only too
            raise opening_fault(path, ex) from ex
    load_sqlite_vec(conn)
    return conn


def _a_file(path):
    """An InputError unless `path` is a regular file or nothing yet: SQLite opening a
    named pipe waits for a writer forever (review 88), a device is no brain."""
    if str(path) in ("", ":memory:"):
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # not there yet (made as a new brain), or SQLite says why not
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise InputError(f"{path} is not a regular file (a named pipe, a device or a socket): a brain is a file")


def opening_fault(path: str | os.PathLike[str], ex: Exception) -> BrainError:
    """What SQLite's error `ex`, opening the file at `path` or reading its schema, means:
    another connection's lock held past the busy timeout (an exclusive one), or a full or
    failing disk (no -shm file can be made), is a WriteError to try again, the file sound
    (review 88: both were told to restore it from a copy); anything else, a damaged file."""
    if is_busy(ex):
        return BrainBusy(f"{path} is locked by another connection ({ex}): nothing was done; try again")
    if _failing_disk(ex):
        return WriteError(
            f"{path} cannot be opened now ({ex}): its disk is full or failing, the file is not damaged by "
            "it; free space and try again"
        )
    return BrainError(f"{path} is not an SQLite database, or is damaged ({ex}): restore it from a copy")


def _unopenable(path, ex):
    """What to say of a `path` SQLite could not open (`ex`): one in a folder that is
    not there is the caller's to mend (an InputError naming both)."""
    folder = Path(path).absolute().parent
    if not folder.is_dir():
        return InputError(f"{path} cannot be opened or created: its folder {folder} does not exist")
    return BrainError(f"{path} cannot be opened or created ({ex}): is its folder writable?")


@functools.cache
def max_variables():
    """The most parameters SQLite takes in one statement: 32,766 since 3.32, 999
    before, or what it was built with."""
    conn = sqlite3.connect(":memory:")
    try:
        options = [row[0] for row in conn.execute("pragma compile_options")]
    finally:
        conn.close()
    built = [int(o.split("=", 1)[1]) for o in options if o.startswith("MAX_VARIABLE_NUMBER=")]
    return built[0] if built else 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999


# how Python's sqlite3 says a text it read is not UTF-8 (plain SQL's cast(x'ff' as text))
UNDECODED_TEXT = "Could not decode to UTF-8"


@contextlib.contextmanager
def faults_named():
    """An SQLite error that is not about waiting for a lock, a read-only file or an
    interrupted query means the file is damaged, or a tool changed its tables
    (dropped or retyped columns): a BrainError saying what to do."""
    try:
        yield
    except sqlite3.DatabaseError as ex:
        fault = _fault(ex)
        if fault is None:
            raise
        raise fault from ex


@contextlib.contextmanager
def write_failures(nothing_done):
    """A write transaction's SQLite failure as its caller is told it, saying
    `nothing_done` first: the file damaged or its tables changed (faults_named's
    BrainError, saying to run check); any other (the lock not had in time, a
    read-only file, the disk) a WriteError: the same request may be tried again."""
    try:
        yield
    except sqlite3.Error as ex:
        fault = _fault(ex, nothing_done) if isinstance(ex, sqlite3.DatabaseError) else None
        raise fault or WriteError(f"{nothing_done}: {ex}") from ex


def _failing_disk(ex):
    """Whether SQLite's error `ex` is the disk's (full, or failing to read or write)."""
    return any(words in str(ex) for words in ("disk I/O error", "disk is full"))


def _fault(ex, done=None):
    """What SQLite's DatabaseError `ex` means to a caller (faults_named): None for
    waiting on a lock, a read-only file or an interrupted query, which the caller
    answers; an InputError for a statement beyond SQLite's limits; a WriteError for
    a failing disk; else a BrainError saying to run check.
    `done`: what was not done, said first."""
    if is_busy(ex) or cannot_write(ex) or "interrupted" in str(ex):
        return None
    said = f"{done}: " if done else ""
    if beyond_limits(ex):  # the request's size, not the file
        return InputError(f"{said}the request is larger than SQLite can run ({ex}): make it shorter")
    if _failing_disk(ex):  # the server's trouble: try again
        return WriteError(f"{done}: {ex}" if done else f"writing failed ({ex}): nothing of this transaction was stored")
    undecodable = re.match(rf"{UNDECODED_TEXT} column '(.*)' with text", str(ex))
    if undecodable:  # plain SQL's cast(x'ff' as text): check names it where it can; its text is no one's to show
        return BrainError(
            f"{said}the brain holds text that is not UTF-8 in a column named {undecodable[1]}, written with plain "
            f"SQL: find its row with SQL (hex({undecodable[1]}) shows its bytes) and set it"
        )
    return BrainError(
        f"{said}the brain file is damaged, or a tool changed its tables ({ex}): run sqlite-utils brain check"
    )


def read_only_error(path):
    if copies.is_copy(path):
        return ReadOnlyBrain(
            f"{path} is a read-only replica (a copy Litestream follows): it can be recalled from; write to its primary"
        )
    return ReadOnlyBrain(
        f"{path} is read-only (the file, its folder or its filesystem): it can be recalled from, "
        "but nothing can be written to it"
    )


def _begin(conn, poll):
    """BEGIN IMMEDIATE, tried every `poll` seconds (give or take half, so waiters
    do not keep step) until the connection's busy timeout has passed: SQLite's own
    busy handler sleeps up to 100 ms between tries, and a writer that commits and
    begins again at once would have the lock back before a waiter looked."""
    timeout = conn.execute("pragma busy_timeout").fetchone()[0]
    deadline = time.monotonic() + timeout / 1000
    conn.execute("pragma busy_timeout = 0")
    try:
        while True:
            try:
                conn.execute("begin immediate")
                return
            except sqlite3.OperationalError as ex:
                if not is_busy(ex) or time.monotonic() >= deadline:
                    raise
            time.sleep(min(poll * random.uniform(0.5, 1.5), max(0.0, deadline - time.monotonic())))
    finally:
        conn.execute(f"pragma busy_timeout = {timeout}")


def main_file(conn):
    """The path of the file `conn` opened as main ("" for an in-memory database)."""
    return next((row[2] for row in conn.execute("pragma database_list") if row[1] == "main"), "") or ""


def _file_of(conn):
    return main_file(conn) or "the brain"


def touch_page_one(conn):
    """Rewrite page 1 (user_version set to itself) in the open transaction. Copies
    Litestream follows learn of a change only from page 1 (copies.py): without
    it, a write that fits in pages it had (a small remember) stays unseen, by
    FTS5 above all, on every replica that keeps its connections open."""
    version = conn.execute("pragma user_version").fetchone()[0]
    conn.execute(f"pragma user_version = {int(version)}")


@contextlib.contextmanager
def atomic(conn, bulk=False):
    """All or none. The outermost block takes the write lock up front (BEGIN
    IMMEDIATE), so a writer waits its turn for up to busy_timeout instead of
    failing when it first writes; nested blocks are sqlite-utils' savepoints.
    A `bulk` writer, one transaction of many (ingest), tries for the lock less
    often while it waits, so that a writer of one request waiting too goes first.
    Each transaction that wrote rows rewrites page 1, so replicas see it (touch_page_one)."""
    if conn.in_transaction:
        with sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False).atomic():
            yield conn
        return
    try:
        _begin(conn, INGEST_POLL_SECONDS if bulk else WRITER_POLL_SECONDS)
        changes = conn.total_changes
    except sqlite3.OperationalError as ex:
        if cannot_write(ex):
            raise read_only_error(_file_of(conn)) from ex
        if is_busy(ex):
            timeout = conn.execute("pragma busy_timeout").fetchone()[0] / 1000
            raise BrainBusy(
                f"Another writer held the brain's write lock for {timeout:g} s (the busy timeout), "
                "so this transaction was not written."
            ) from ex
        raise
    try:
        yield conn
    except BaseException as ex:
        if conn.in_transaction:  # an error may already have ended it
            conn.execute("rollback")
        if isinstance(ex, sqlite3.OperationalError) and cannot_write(ex):
            raise read_only_error(_file_of(conn)) from ex
        if isinstance(ex, sqlite3.IntegrityError) and str(ex).startswith(RULE_MARK):  # the brain's rules (schema.py)
            raise RuleRefused(f"{ex}; nothing of this transaction was written") from ex
        raise
    try:
        if conn.total_changes != changes:  # a transaction that wrote nothing has nothing to tell replicas
            touch_page_one(conn)
        conn.execute("commit")
    except BaseException as ex:
        if conn.in_transaction:
            conn.execute("rollback")
        if isinstance(ex, sqlite3.OperationalError) and cannot_write(ex):
            raise read_only_error(_file_of(conn)) from ex
        raise


class Turns:
    """The write transactions of a bulk writer (ingest, reindex) taking turns with
    other writers: each begins no sooner than INGEST_PAUSE_SECONDS after the last
    one ended (or as long as that one held the lock, when shorter), and waits for
    the lock as a bulk writer, so a writer waiting meanwhile gets it in between."""

    def __init__(self, conn):
        self.conn = conn
        self.ended, self.held = float("-inf"), 0.0  # when the last one ended (perf_counter), for how long

    @contextlib.contextmanager
    def turn(self):
        """One transaction (atomic), yielding when it began (perf_counter)."""
        time.sleep(max(0.0, self.ended + min(INGEST_PAUSE_SECONDS, self.held) - time.perf_counter()))
        began = None
        try:
            with atomic(self.conn, bulk=True):
                began = time.perf_counter()
                yield began
        finally:
            self.ended = time.perf_counter()
            self.held = self.ended - began if began else 0.0
