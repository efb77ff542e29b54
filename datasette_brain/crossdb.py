"""A brain read through another database's connection: `_memory` under Datasette's
--crossdb, which attaches every file, or a database that attached a brain (another
plugin, or a canned query's ATTACH). Datasette's permissions say which SQL may run on
which database, not which files that SQL reaches, so the refusal is SQLite's own: an
authorizer on every connection Datasette opens, which no route, canned query or SQL
function gets past.

The authorizer cannot know the actor (queries run on executor threads, and sqlite3
reuses a statement prepared for one actor for the next), so it decides by the brain
alone. A database one of whose brain tables an anonymous actor may not read (its
memories, its graph, any table of a brain, or of a file that may become one) is
*protected*: no other connection reads anything of it, whoever asks; its own database
still answers whoever may read it.

The file decides, never the schema's name (anyone's ATTACH may take a served
database's name): each connection knows the file behind every schema it had when
prepared, and Datasette's own --crossdb attaches; an ATTACH of a protected file
under any spelling (path, URI, link) is refused. An ATTACH whose file SQLite learns
only when it runs (a parameter, an expression), or one before the server has learned
which brains are protected, may be a protected brain under any name: from then on the
connection refuses the brain tables of every schema whose file it does not know.
"""

import os
import threading
import urllib.parse
import weakref
from typing import NamedTuple

from datasette.database import QueryInterrupted
from datasette.utils import sqlite3
from markupsafe import Markup

from brain_sql import for_plugin

from . import tools

OWN_SCHEMAS = ("main", "temp")  # the connection's own database, and its temporary one
# the actions whose first argument is a table
TABLE_ACTIONS = frozenset((sqlite3.SQLITE_READ, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE))
UNKNOWN = object()  # a schema the connection did not have when prepared


class File(NamedTuple):
    """A file as the filesystem knows it: every path to it, links included, is one File."""

    real: str
    identity: tuple

    @classmethod
    def of(cls, path):
        """The file at `path`; None when there is none (an in-memory or temporary database)."""
        try:
            stat = os.stat(path)
            return cls(os.path.realpath(path), (stat.st_dev, stat.st_ino))
        except (OSError, ValueError):  # ValueError: a NUL in the name
            return None


def spellings(filename):
    """The paths an ATTACH of `filename` may open: the name itself, and the path of it
    read as an SQLite URI (file:[//host]/path?query#fragment, percent-encoded)."""
    paths = [filename]
    if filename.startswith("file:"):
        path = filename[len("file:") :].partition("#")[0].partition("?")[0]
        if path.startswith("//"):
            path = "/" + path[2:].partition("/")[2]
        paths.append(urllib.parse.unquote(path))
    return paths


class Known(NamedTuple):
    """What startup learned: the protected databases' names, and their files."""

    protected: frozenset
    files: frozenset  # realpaths and (device, inode) pairs
    paths: tuple = ()  # the protected files' realpaths, whose tables' names Guard.names reads

    def holds(self, file):
        return file is not None and (file.real in self.files or file.identity in self.files)


class Guard:
    """What the authorizers of one Datasette instance's connections know: nothing
    until startup, then which databases and files are protected, and the names of
    the protected files' tables and views."""

    known: Known | None = None

    def __init__(self):
        self._lock = threading.Lock()  # authorizers run on every executor thread
        self._readers = {}  # a protected file's realpath -> (its stat when opened, a read-only connection to it)
        self._names = {}  # realpath -> ((its stat, its schema_version), the lower-case names of its tables, ...)

    def names(self):
        """The lower-case names of the protected files' tables, views and indexes (a
        table a user added included: an index's names its columns to pragma_index_info),
        read again when a file's schema changed or the file at its path did (a restore,
        review 129: another inode; `cp` over it, review 130: its size or time); every
        name once read is kept, since a connection opened before a restore still reads
        the file it attached. None when a file cannot be read (its names unknown: refuse)."""
        found: set[str] = set()
        if self.known is None:
            return None
        with self._lock:
            for path in self.known.paths:
                try:
                    status = os.stat(path)
                except (OSError, ValueError):
                    return None
                seen = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
                try:
                    opened, reader = self._readers.get(path, (None, None))
                    if opened != seen:
                        if reader is not None:
                            reader.close()
                        reader = sqlite3.connect(
                            f"file:{urllib.parse.quote(path)}?mode=ro", uri=True, check_same_thread=False, timeout=0
                        )  # a file locked past a read is refused, not waited for
                        self._readers[path] = (seen, reader)
                    version = reader.execute("pragma schema_version").fetchone()[0]
                    known_as, names = self._names.get(path, (None, frozenset()))
                    if known_as != (seen, version):
                        rows = reader.execute("select name from sqlite_master where type in ('table', 'view', 'index')")
                        names = names | {str(name).lower() for (name,) in rows if name is not None}
                        self._names[path] = ((seen, version), names)
                except sqlite3.Error:
                    return None
                found |= names
        return found


class ConnectionGuard:
    """One connection's authorizer: the files behind its schemas, and whether an
    ATTACH of a file it could not judge made every other schema suspect."""

    def __init__(self, guard, schemas, expected):
        self.guard = guard
        self.schemas = schemas  # schema name -> File (or None: no file)
        self.expected = expected  # Datasette's own --crossdb ATTACHes still to come: filename -> (name, File)
        self.suspect = False

    def authorize(self, action, table, column, schema, trigger_or_view):
        if self.expected and not (action == sqlite3.SQLITE_ATTACH and table in self.expected):
            self.expected = None  # Datasette's attaching is over: any later ATTACH is someone else's
        if action == sqlite3.SQLITE_ATTACH:
            return self.attaching(table)
        if action == sqlite3.SQLITE_DETACH:
            self.detaching(table)
        if schema is None and action == sqlite3.SQLITE_READ and table is not None:
            return self.unqualified(table)
        if schema is None and action == sqlite3.SQLITE_PRAGMA and column is not None:  # pragma_table_info('t')
            return self.unqualified(column)
        if schema is None or schema in OWN_SCHEMAS:  # first of the reads: it is every read a brain's recall makes
            return sqlite3.SQLITE_OK
        known = self.guard.known
        if known is not None:
            if not known.protected:
                return sqlite3.SQLITE_OK
            file = self.schemas.get(schema, UNKNOWN)
            if file is not UNKNOWN:
                return sqlite3.SQLITE_DENY if known.holds(file) else sqlite3.SQLITE_OK
            if not self.suspect:  # attached since by an ATTACH judged not to open a protected file
                return sqlite3.SQLITE_OK
        # before startup, or a schema whose file is not known: it may be a protected brain
        if action in TABLE_ACTIONS and table is not None and for_plugin.brain_table(table):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def unqualified(self, table):
        """A read of no column (count(*), a row's existence) of a table named without
        its schema, or a pragma's of one (pragma_table_info('t')): SQLite names no
        schema for it, and it may be any attached database's, a table added to a
        protected brain's file included (review 111: its row count answered). When
        the connection has a protected brain attached, a name of a brain's table, or
        of a protected file's table or view, is refused (named with its database, it
        is judged by that database's file); when it has one it cannot judge (before
        startup, an ATTACH of a file it could not tell), any name is. A CTE's or a
        table-valued function's name is no table's (review 128)."""
        known = self.guard.known
        if not (self.suspect or (self.schemas and (known is None or any(map(known.holds, self.schemas.values()))))):
            return sqlite3.SQLITE_OK
        if self.suspect or known is None or for_plugin.brain_table(table):
            return sqlite3.SQLITE_DENY
        names = self.guard.names()
        return sqlite3.SQLITE_DENY if names is None or table.lower() in names else sqlite3.SQLITE_OK

    def attaching(self, filename):
        if self.expected:
            name, file = self.expected.pop(filename)
            self.schemas[name] = file
            return sqlite3.SQLITE_OK
        known = self.guard.known
        if filename is None or known is None:
            self.suspect = True
        elif any(known.holds(File.of(path)) for path in spellings(filename)):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def detaching(self, name):
        if name is None:  # which schema went is known only when it runs
            self.schemas.clear()
            self.suspect = True
        else:
            self.schemas.pop(name, None)


_guards = weakref.WeakKeyDictionary()  # Datasette instance -> its Guard
_guards_lock = threading.Lock()  # connections are prepared on several threads at once


def _guard(datasette):
    with _guards_lock:
        guard = _guards.get(datasette)
        if guard is None:
            guard = _guards[datasette] = Guard()
        return guard


def _crossdb_attaches(datasette, database):
    """The ATTACHes Datasette runs on `_memory` under --crossdb right after the
    connection's prepare_connection hooks, by the filename it gives SQLite."""
    if not (datasette.crossdb and database == "_memory"):
        return None
    return {
        "file:{}?{}".format(db.path, "mode=ro" if db.is_mutable else "immutable=1"): (name, File.of(db.path))
        for name, db in datasette.databases.items()
        if not db.is_memory
    }


def guard_connection(conn, datasette, database):
    """Install the authorizer on one of `datasette`'s connections, knowing the file
    behind each schema it already has (another plugin's hook may have attached one)."""
    schemas = {row[1]: File.of(row[2]) for row in conn.execute("PRAGMA database_list") if row[1] not in OWN_SCHEMAS}
    conn.set_authorizer(ConnectionGuard(_guard(datasette), schemas, _crossdb_attaches(datasette, database)).authorize)


LEARN_TRIES = 3  # a permission query Datasette's SQL time limit cut (a loaded machine) is asked again


async def _readable_by_anyone(datasette, name):
    """tools.tables_readable for an anonymous actor; when Datasette's SQL time limit
    cuts its permission queries every time, the database counts as protected (a
    start that refuses too much, never one that fails or guards too little)."""
    for _ in range(LEARN_TRIES):
        try:
            return await tools.tables_readable(datasette, None, name)
        except QueryInterrupted:
            continue
    return False


async def learn(datasette):
    """Which databases are protected: from now on the authorizers know, and refuse
    only those. Every database one of whose brain tables an anonymous actor may not
    read (tools.tables_readable) counts, whether or not it is a brain yet: a file
    served empty and ingested into later (the usual way to start) is protected from
    its first memory."""
    names = [name for name in datasette.databases if name not in ("_memory", "_internal")]
    protected = [name for name in names if not await _readable_by_anyone(datasette, name)]
    files = [File.of(datasette.databases[name].path) for name in protected if datasette.databases[name].path]
    keys = {key for file in files if file is not None for key in file}
    _guard(datasette).known = Known(frozenset(protected), frozenset(keys), tuple(sorted({f.real for f in files if f})))


def explain(datasette, error):
    """SQLite's refusal to read a protected brain, with where to read it instead;
    any other error as it is."""
    text = str(error)
    known = _guard(datasette).known
    refusal = text == "not authorized" or (text.startswith("access to ") and text.endswith(" is prohibited"))
    if not (refusal and known and known.protected):
        return error
    for name in known.protected:
        if text.startswith(f"access to {name}."):
            url = datasette.urls.database(name)
            return Markup(
                "{}: not everyone may read the memories of {}, so no other database reads them, not even with "
                '--crossdb; query it through its own database, <a href="{}">{}</a>'
            ).format(text, name, url, url)
    return (
        f"{text}: a brain's memories that not everyone may read are read only through the brain's own database"
        " (a table read for no column, count(*) say, is judged by its database: name it, as in db.table)"
    )
