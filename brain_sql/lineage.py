"""What an object a person or tool added to a brain's file shows of its other tables:
a view's reads, a full-text index made over a table (`sqlite-utils enable-fts`) and
its shadow tables, a table triggers fill from others. Whoever may not read one of
those tables may read none of it (review 106: a view over `knowledge` answered its
rows to an actor denied `knowledge`)."""

import re

from .connection import main_file, sqlite3

EVERY_TABLE = "*"  # what a view shows whose reads SQLite cannot tell without running it
# the tables FTS3/4/5 keep an index in, named after it: they are that index
_SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config", "_segments", "_segdir", "_stat")
# an FTS table's content= option: quoted, bracketed or bare
_CONTENT = re.compile(
    r"""[(,]\s*content\s*=\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"|\[([^\]]*)\]|`([^`]*)`|([\w$]+))""", re.I
)


_told: dict[tuple, frozenset[str]] = {}  # (file, schema version, name) -> tables_shown: asked on every page
_TOLD_AT_MOST = 4096


def tables_shown(conn: sqlite3.Connection, name: str) -> set[str]:
    """The tables (and virtual tables) of `conn`'s main schema whose rows `name`
    shows, followed through views, content tables and triggers; EVERY_TABLE among
    them when a view's reads cannot be told (it calls a function SQLite does not
    know, or a module it cannot describe). Empty for a table nothing fills. Kept
    for the schema as it is: a change of it (its version) asks again."""
    path = main_file(conn)
    if not path:  # a database in memory: no file to know it by
        return _shown(conn, name)
    key = (path, conn.execute("pragma schema_version").fetchone()[0], name)
    if key not in _told:
        if len(_told) >= _TOLD_AT_MOST:
            _told.clear()
        _told[key] = frozenset(_shown(conn, name))
    return set(_told[key])


def _shown(conn, name):
    objects = {
        row[0]: row[1:]
        for row in conn.execute(
            "select name, type, tbl_name, coalesce(sql, '') from sqlite_master where name is not null"
        )
    }
    shown, seen, todo = set(), {name}, [name]
    while todo:
        for source in _sources(conn, objects, todo.pop()):
            if source == EVERY_TABLE or objects.get(source, ("table",))[0] != "view":
                shown.add(source)
            if source not in seen and source != EVERY_TABLE:
                seen.add(source)
                todo.append(source)
    shown.discard(name)
    return shown


def _sources(conn, objects, name):
    """The objects `name` shows rows of, one step back."""
    kind, _, sql = objects.get(name, ("table", name, ""))
    if kind == "view":
        return _view_reads(conn, objects, name)
    # a trigger naming it fills it from the table the trigger is on
    found = {table for k, table, text in objects.values() if k == "trigger" and _writes(text, name)} - {name}
    if sql.lower().startswith("create virtual table"):
        content = _CONTENT.search(sql)
        value = next((group for group in content.groups() if group is not None), "") if content else ""
        if value:
            found.add(value.replace("''", "'").replace('""', '"'))
    index = next((name[: -len(s)] for s in _SHADOW_SUFFIXES if name.endswith(s) and name[: -len(s)] in objects), None)
    if index is not None and objects[index][2].lower().startswith("create virtual table"):
        found.add(index)
    return found


def _writes(sql, name):
    """Whether trigger text `sql` inserts into or updates `name` (in any quoting, any case)."""
    named = (
        "|".join(re.escape(q[0] + name.replace(q[-1], q[-1] * 2) + q[-1]) for q in ('"', "'", "`", "[]"))
        + rf"|{re.escape(name)}(?![\w$])"
    )
    return (
        re.search(
            rf"(?:(?:insert(?:\s+or\s+\w+)?|replace)\s+into|update(?:\s+or\s+\w+)?)\s+(?:main\s*\.\s*)?(?:{named})",
            sql,
            re.I,
        )
        is not None
    )


def _view_reads(conn, objects, view):
    """What view `view` reads, as SQLite's authorizer sees it prepare a select of it,
    in a database in memory holding the schema's tables (their columns alone) and
    views, so that nothing of the file is run."""
    scratch = sqlite3.connect(":memory:")
    reads = set()

    def authorize(action, table, *_):
        if action == sqlite3.SQLITE_READ:
            reads.add(table)
        return sqlite3.SQLITE_OK

    try:
        for name, (kind, _, _) in objects.items():
            if kind == "table" and not name.startswith("sqlite_"):
                columns = [row[1] for row in conn.execute(f"pragma table_xinfo({_quoted(name)})")]
                scratch.execute(f"create table {_quoted(name)} ({', '.join(map(_quoted, columns)) or 'x'})")
        for kind, _, sql in objects.values():
            if kind == "view":
                scratch.execute(sql)
        scratch.set_authorizer(authorize)
        scratch.execute(f"explain select * from {_quoted(view)}")
    except sqlite3.Error:
        return {EVERY_TABLE}
    finally:
        scratch.close()
    return reads - {view}


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'
