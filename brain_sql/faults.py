"""What the faces' operations say when the brain, not the caller, is at fault: a
damaged file, tables a tool rebuilt without their columns, values of the wrong
kind written with plain SQL, or a schema an older version wrote and nobody
migrated yet. Each is a BrainError that says which command mends it, instead of
SQLite's or Python's own error."""

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from . import schema, values
from .connection import Connection, faults_named, sqlite3
from .errors import BrainError, InputError

P = ParamSpec("P")
R = TypeVar("R")

NOT_MIGRATED = "this brain was written by an older datasette-brain and its schema is not migrated yet"


def named(operation: Callable[Concatenate[Connection, P], R]) -> Callable[Concatenate[Connection, P], R]:
    """`operation` on the brain on a connection, with a damaged
    file, tables a tool rebuilt without their columns, or values of the wrong kind
    written with plain SQL (a failure they caused, or a BLOB read where text
    belongs), a BrainError that says to run check instead of SQLite's or Python's
    own error."""

    @functools.wraps(operation)
    def named(conn: Connection, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with faults_named():
                result = operation(conn, *args, **kwargs)
        except BrainError as ex:
            if type(ex) is BrainError and outdated(conn):
                raise BrainError(
                    f"{NOT_MIGRATED} (a server migrates a brain it may write when it starts): "
                    "run sqlite-utils brain init DB"
                ) from ex
            if isinstance(ex.__cause__, sqlite3.DatabaseError):  # SQLite's own, on a BLOB that is no UTF-8 text, say
                blame_values(conn, ex)
            raise
        except values.VALUE_FAILURES as ex:
            if not isinstance(ex, InputError):  # the caller's mistake
                blame_values(conn, ex)
            if isinstance(ex, UnicodeDecodeError):  # SQLite's message quoting schema bytes that are no UTF-8
                raise BrainError(
                    f"{operation.__name__}: SQLite's error quotes bytes that are not UTF-8 text ({ex.reason}): the "
                    "brain's schema is damaged, or a tool wrote it so: run sqlite-utils brain check, and if it names "
                    "nothing, restore the brain from a copy"
                ) from ex
            raise  # a bug: as it is
        if values.holds_unreadable(result):  # a BLOB read where text belongs, an infinite number
            blame_values(conn)
            raise BrainError(
                f"{operation.__name__}: the brain holds a value of the wrong kind (a BLOB where text belongs, "
                "an infinite number): run sqlite-utils brain check"
            )
        return result

    return named


def blame_values(conn: Connection, cause: BaseException | None = None) -> None:
    """Raise check's BrainError when the brain holds values of the wrong kind:
    what went wrong (`cause`) is theirs to answer for."""
    fault = values.fault(conn)
    if fault is not None:
        raise fault from cause


def outdated(conn: Connection) -> bool:
    """Whether `conn` holds a brain with migrations still to apply (False for a
    file that is no brain, or when even that cannot be read)."""
    try:
        return schema.is_brain(conn) and bool(schema.pending_migrations(conn))
    except sqlite3.DatabaseError:
        return False
