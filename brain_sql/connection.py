"""Opening and preparing SQLite connections: one place that loads sqlite-vec and
registers the brain_* functions, used by plain Python, sqlite-utils and Datasette."""

import importlib


class BrainError(Exception):
    """A problem the user can fix; its message says how."""


def _sqlite3_module():
    # The same choice sqlite-utils and Datasette make: pysqlite3 when installed,
    # because it can load extensions where many Python builds cannot.
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return importlib.import_module("sqlite3")


sqlite3 = _sqlite3_module()


def load_sqlite_vec(conn):
    """Load sqlite-vec into `conn`, or fail saying what to install."""
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


def prepare_connection(conn, model_id=None):
    """Load sqlite-vec and register the brain_* SQL functions on `conn`.

    `model_id` defaults to the model the database records (or the configured
    default for a database that is not a brain yet).
    """
    from .functions import register_functions
    from .schema import recorded_model

    try:
        conn.execute("select vec_version()")
    except sqlite3.OperationalError:
        load_sqlite_vec(conn)
    register_functions(conn, model_id or recorded_model(conn))


def connect(path, model_id=None):
    """Open a brain file for reading and writing, ready for every brain_* function."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("pragma journal_mode = wal")
    conn.execute("pragma synchronous = normal")
    conn.execute("pragma busy_timeout = 30000")
    conn.execute("pragma cache_size = -64000")  # 64 MB, as the reference; vec0 rewrites chunk blobs
    conn.execute("pragma temp_store = memory")
    prepare_connection(conn, model_id)
    return conn
