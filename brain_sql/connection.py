"""Opening SQLite connections and writing through them: the driver choice,
sqlite-vec loading, the pragmas, and the one transaction helper every write uses."""

import contextlib
import importlib

import sqlite_utils

from .config import busy_timeout_ms
from .errors import BrainBusy, BrainError


def _sqlite3_module():
    # The same choice sqlite-utils and Datasette make: pysqlite3 when installed,
    # because it can load extensions where many Python builds cannot.
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return importlib.import_module("sqlite3")


sqlite3 = _sqlite3_module()


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


def open_connection(path, read_only=False):
    """A connection to the file at `path` in autocommit mode, with sqlite-vec loaded
    and the pragmas a brain is written and read with; `read_only` opens it for
    reading only, changing nothing about the file. A file that is not an SQLite
    database (or is damaged past opening) is a BrainError naming it."""
    if read_only:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"pragma busy_timeout = {busy_timeout_ms()}")  # first: WAL waits for a writer making the file
        if not read_only:
            conn.execute("pragma journal_mode = wal")
        conn.execute("pragma synchronous = normal")
        conn.execute("pragma cache_size = -64000")  # 64 MB, as the reference; vec0 rewrites chunk blobs
        conn.execute("pragma temp_store = memory")
    except sqlite3.DatabaseError as ex:
        conn.close()
        if is_busy(ex):
            raise
        raise BrainError(f"{path} is not an SQLite database, or is damaged ({ex}): restore it from a copy") from ex
    load_sqlite_vec(conn)
    return conn


@contextlib.contextmanager
def atomic(conn):
    """All or none. The outermost block takes the write lock up front (BEGIN
    IMMEDIATE), so a writer waits its turn for up to busy_timeout instead of
    failing when it first writes; nested blocks are sqlite-utils' savepoints."""
    if conn.in_transaction:
        with sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False).atomic():
            yield conn
        return
    try:
        conn.execute("begin immediate")
    except sqlite3.OperationalError as ex:
        if is_busy(ex):
            timeout = conn.execute("pragma busy_timeout").fetchone()[0] / 1000
            raise BrainBusy(
                f"Another writer held the brain's write lock for {timeout:g} s (the busy timeout), "
                "so this transaction was not written."
            ) from ex
        raise
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # an error may already have ended it
            conn.execute("rollback")
        raise
    try:
        conn.execute("commit")
    except BaseException:
        if conn.in_transaction:
            conn.execute("rollback")
        raise
