"""A brain read through another database's connection: `_memory` under Datasette's
--crossdb, which attaches every file, or a database another plugin attached a brain
to. Datasette's permissions say which SQL may run on which database, not which
files that SQL reaches, so the refusal is SQLite's own: an authorizer on every
connection Datasette opens, which no route, canned query or SQL function gets past.

The authorizer cannot know the actor (queries run on executor threads, and sqlite3
reuses a statement prepared for one actor for the next), so it decides by the brain
alone. A database whose memories an anonymous actor may not read (a brain, or a
file that may become one) is *protected*: no
other connection reads anything of it, whoever asks; its own database still answers
whoever may read it. A schema that is not one of Datasette's databases (another
plugin's ATTACH) may be a protected brain under another name: while any brain is
protected, its memory tables are refused; and so are every attached schema's until
the server has started and learned which brains are protected.
"""

import weakref

from datasette.utils import sqlite3
from markupsafe import Markup

from brain_sql import for_plugin

from . import tools

OWN_SCHEMAS = ("main", "temp")  # the connection's own database, and its temporary one
# the actions whose first argument is a table
TABLE_ACTIONS = frozenset((sqlite3.SQLITE_READ, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE))


def memory_table(table):
    """Whether `table` is a brain's memories or derived from them."""
    return table == "knowledge" or for_plugin.derived_from_knowledge(table)


class Guard:
    """What the authorizers of one Datasette instance's connections know: nothing
    until startup, then Datasette's database names and the protected brains'."""

    known = None  # (database names, protected brain names)

    def authorize(self, action, table, column, schema, trigger_or_view):
        if schema is None or schema in OWN_SCHEMAS:  # first: it is every read a brain's recall makes
            return sqlite3.SQLITE_OK
        known = self.known
        if known is not None:
            names, protected = known
            if schema in protected:
                return sqlite3.SQLITE_DENY
            if not protected or schema in names:
                return sqlite3.SQLITE_OK
        # before startup, or a schema Datasette does not serve: it may be a protected brain
        if action in TABLE_ACTIONS and table is not None and memory_table(table):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


_guards = weakref.WeakKeyDictionary()  # Datasette instance -> its Guard


def _guard(datasette):
    guard = _guards.get(datasette)
    if guard is None:
        guard = _guards[datasette] = Guard()
    return guard


def guard_connection(conn, datasette):
    """Install the authorizer on one of `datasette`'s connections."""
    conn.set_authorizer(_guard(datasette).authorize)


async def learn(datasette):
    """Which databases are protected: from now on the authorizers know, and refuse
    only those. Every database an anonymous actor may not read `knowledge` of counts,
    whether or not it is a brain yet: a file served empty and ingested into later
    (the usual way to start) is protected from its first memory."""
    names = [name for name in datasette.databases if name not in ("_memory", "_internal")]
    protected = [name for name in names if not await tools.memories_readable(datasette, None, name)]
    _guard(datasette).known = (frozenset(datasette.databases), frozenset(protected))


def explain(datasette, error):
    """SQLite's refusal to read a protected brain, with where to read it instead;
    any other error as it is."""
    text = str(error)
    known = _guard(datasette).known
    refusal = text == "not authorized" or (text.startswith("access to ") and text.endswith(" is prohibited"))
    if not (refusal and known and known[1]):
        return error
    for name in known[1]:
        if text.startswith(f"access to {name}."):
            url = datasette.urls.database(name)
            return Markup(
                "{}: not everyone may read the memories of {}, so no other database reads them, not even with "
                '--crossdb; query it through its own database, <a href="{}">{}</a>'
            ).format(text, name, url, url)
    return f"{text}: a brain's memories that not everyone may read are read only through the brain's own database"
