"""What an object a person or tool added to a brain's file shows of its other tables:
a view's reads, a full-text index made over a table (`sqlite-utils enable-fts`) or a
vocabulary of one, their shadow tables, a table triggers fill from others. Whoever
may not read one of those tables may read none of it (review 106: a view over
`knowledge` answered its rows to an actor denied `knowledge`).

SQLite tells what it reads: the schema's tables (as their SQL makes them, a virtual
table with its columns alone), indexes, views and triggers are made again in a
database in memory, and its authorizer watches a select of each view and a write to
each table that has triggers being prepared (nothing of the file is run). What it
cannot tell (a view calling a function it does not know, a virtual table of a module
other than FTS's, sqlite-vec's or R*Tree's) shows every table."""

import re
from collections import defaultdict

from .connection import Connection, main_file, sqlite3

EVERY_TABLE = "*"
_FTS = ("fts3", "fts4", "fts5")
# a vocabulary module reads an FTS index: its arguments past this many name the schema first
_VOCABULARIES = {"fts5vocab": 2, "fts4aux": 1}
_OWN_ROWS = ("vec0", "rtree", "rtree_i32", "geopoly")  # modules that keep the rows written to them, as a table does
# what puts rows of others in a table, or takes some out by them (what is left tells of them)
_WRITES = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE)
_LABELS = "labels"  # flows[(_LABELS, table)]: the tables its foreign keys point at
_told: dict[tuple, tuple[dict, dict[str, str]]] = {}  # (file, schema version) -> flows, kinds
_TOLD_AT_MOST = 64


def tables_shown(conn: Connection, name: str) -> set[str]:
    """The tables (and virtual tables) of `conn`'s main schema whose rows `name`
    shows, followed through views, FTS content tables, vocabularies, shadow tables and
    triggers; EVERY_TABLE among them when SQLite cannot tell. Empty for a table
    nothing fills. The schema's flows are found once for each version of it."""
    flows, kinds = _flows(conn)
    shown, seen, todo = set(), {name}, [name]
    while todo:
        at = todo.pop()
        # a table's foreign keys show the rows they point at, and what those show: Datasette labels a key
        # by its row (review 111, 113)
        for source in flows.get(at, frozenset()) | (flows.get((_LABELS, at), frozenset()) if at == name else set()):
            if source == EVERY_TABLE or kinds.get(source) != "view":
                shown.add(source)
            if source not in seen and source != EVERY_TABLE:
                seen.add(source)
                todo.append(source)
    shown.discard(name)
    return shown


def object_kind(conn: Connection, name: str) -> str | None:
    """What `name` is in `conn`'s main schema, as SQLite's table_list says ('table',
    'virtual', 'shadow', 'view') or 'trigger', 'index'; None when nothing is so named."""
    return _flows(conn)[1].get(name)


def _flows(conn):
    """({object: the objects whose rows flow into it}, {object: its kind}), kept for
    the file and version of its schema: asked for every table on a page, each asks
    only the schema's version."""
    path = main_file(conn)
    key = (path, conn.execute("pragma main.schema_version").fetchone()[0])
    if path and key in _told:
        return _told[key]
    kinds = {row[1]: row[2] for row in conn.execute("pragma main.table_list") if row[0] == "main"}
    kinds.update(
        dict(conn.execute("select name, type from main.sqlite_master where type in ('view', 'trigger', 'index')"))
    )
    spelled = {_folded(name): name for name in kinds}  # SQLite's names know no ASCII case: as the schema spells them
    found = (
        {name: frozenset(spelled.get(_folded(s), s) for s in sources) for name, sources in _found(conn, kinds).items()},
        kinds,
    )
    for name, kind in kinds.items():
        if kind == "table":
            keys = conn.execute("select \"table\" from pragma_foreign_key_list(?, 'main')", [name]).fetchall()
            if keys:
                found[0][(_LABELS, name)] = frozenset(spelled.get(_folded(key), key) for (key,) in keys)
    if path:  # a database in memory has no file to know it by
        if len(_told) >= _TOLD_AT_MOST:
            _told.clear()
        _told[key] = found
    return found


def _found(conn, kinds):
    objects = conn.execute(
        "select name, type, tbl_name, coalesce(sql, '') from main.sqlite_master where name not like 'sqlite\\_%' "
        "escape '\\'"
    ).fetchall()
    flows = defaultdict(set)
    virtual = {name: sql for name, kind, _, sql in objects if kinds.get(name) == "virtual"}
    for name, sql in virtual.items():
        flows[name] |= _module_sources(sql)
    for name, kind in kinds.items():  # a module's tables are its virtual table
        owner = next((v for v in virtual if name.startswith(v + "_")), None) if kind in ("shadow", "table") else None
        if owner is not None:
            flows[name].add(owner)
    scratch = sqlite3.connect(":memory:")
    try:
        _authorized(conn, scratch, objects, flows, virtual)
    finally:
        scratch.close()
    return flows


def _module_sources(sql):
    """What a virtual table made by `sql` shows: an FTS index its content= table (none:
    its own rows, filled by writes), a vocabulary its FTS index, a module that keeps the
    rows written to it nothing, another module (or SQL not read) anything."""
    parts = _virtual_parts(sql)
    if parts is None:
        return {EVERY_TABLE}
    module, arguments = parts
    if module in _FTS:  # a value of several tokens (FTS4 reads 'knowledge' x as knowledge): not told
        content = [value for key, value in (_pair(a) for a in arguments) if key == "content"]
        if not content or content[-1] == "":
            return set()
        return {EVERY_TABLE} if content[-1] is None else {content[-1]}
    if module in _VOCABULARIES and arguments:  # fts5vocab(table, type) or (schema, table, type); fts4aux(table)
        table = arguments[1] if len(arguments) > _VOCABULARIES[module] else arguments[0]
        return {_unquoted(table[0])} if len(table) == 1 else {EVERY_TABLE}
    return set() if module in _OWN_ROWS else {EVERY_TABLE}


# SQL's tokens, as SQLite reads them: a comment, a quoted name or text, a word, a character
_TOKENS = re.compile(
    r"""(?P<skip>[ \t\n\f\r]+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))"""  # SQLite's spaces alone (no NBSP)
    r"""|(?P<token>'(?:[^']|'')*'?|"(?:[^"]|"")*"?|`(?:[^`]|``)*`?"""
    r"""|\[[^\]]*\]?|(?:[A-Za-z0-9_$]|[^\x00-\x7f])+|.)""",  # a name: ASCII word characters and any past ASCII
    re.S,
)


def _tokens(sql):
    """`sql`'s tokens, comments left out."""
    return [m["token"] for m in _TOKENS.finditer(sql) if m["token"] is not None]


def _virtual_parts(sql):
    """(module, [each argument's tokens]) of a CREATE VIRTUAL TABLE statement, read as
    SQLite reads it (comments, quoted names); None when it is not read so."""
    tokens = _tokens(sql)
    words = [_folded(t) for t in tokens]
    if words[:3] != ["create", "virtual", "table"]:
        return None
    at = 6 if words[3:6] == ["if", "not", "exists"] else 3
    at += 3 if len(words) > at + 1 and words[at + 1] == "." else 1  # the table's name, its schema's first
    if len(words) < at + 2 or words[at] != "using":
        return None
    module = _folded(_unquoted(tokens[at + 1]))
    rest = tokens[at + 2 :]
    if not rest:
        return module, []
    if rest[0] != "(" or rest[-1] != ")":
        return None
    arguments, current, depth = [], [], 0
    for token in rest[1:-1]:
        if token == "," and depth == 0:
            arguments.append(current)
            current = []
            continue
        depth += (token == "(") - (token == ")")
        current.append(token)
    arguments.append(current)
    return module, [argument for argument in arguments if argument]


def _pair(argument):
    """(key, value) of a module argument `key = value`, else (None, None): its key as
    FTS5 reads an option, any prefix of its name ("c=" is "content="); its value None
    when it is more than one token (not read here as FTS reads it)."""
    if len(argument) < 3 or argument[1] != "=":
        return None, None
    key = _folded(_unquoted(argument[0]))
    value = _unquoted(argument[2]) if len(argument) == 3 else None
    return ("content" if key and "content".startswith(key) else key), value


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _folded(name):
    """`name` in lower case as SQLite folds names: ASCII letters alone (Python's lower()
    folds more: a Kelvin sign is a k to it)."""
    return name.translate(_ASCII_LOWER)


def _unquoted(token):
    if len(token) >= 2 and (token[0], token[-1]) in (("'", "'"), ('"', '"'), ("`", "`"), ("[", "]")):
        inner = token[1:-1]
        return inner if token[0] == "[" else inner.replace(token[0] * 2, token[0])
    return token


def _authorized(conn, scratch, objects, flows, virtual):
    """Add to `flows` what SQLite's authorizer sees read: by each view, and by each
    trigger, into each table it writes (with the rows of the table it is on); the
    `virtual` tables are made with their columns alone (no module runs in the copy)."""
    for name, kind, _, sql in objects:
        if kind == "table":
            _make_table(conn, scratch, name, None if name in virtual else sql)
    unmade = set()
    for name, kind, _, sql in objects:
        if kind in ("index", "view", "trigger") and sql:  # an index: the target an upsert in a trigger names
            try:
                scratch.execute(sql)
            except sqlite3.Error:
                unmade.add(name)
    events = []
    scratch.set_authorizer(lambda action, first, second, database, source: events.append((action, first, source)) or 0)
    for name, kind, _, _ in objects:
        if kind == "view":
            flows[name] |= _view_reads(scratch, events, name)
    triggers = defaultdict(list)
    for name, kind, table, _ in objects:
        if kind == "trigger":
            triggers[table].append(name)
    # a view too: a write into it is its INSTEAD OF triggers' (review 111)
    tables = {name for name, kind, _, _ in objects if kind in ("table", "view")}
    for table, names in triggers.items():
        told = _trigger_flows(scratch, events, table)
        if told is None or unmade & set(names):  # what they write is not told: whatever they name shows all
            texts = [sql for name, _, _, sql in objects if name in names]
            told = {  # its own table is named once at least, by ON
                written: {EVERY_TABLE}
                for written in tables
                if any(_names(t, written) > (_folded(written) == _folded(table)) for t in texts)
            }
        for written, sources in told.items():
            flows[written] |= sources


def _view_reads(scratch, events, view):
    """What a select of `view` reads, as the authorizer sees it prepared."""
    events.clear()
    try:
        scratch.execute(f"explain select * from {_quoted(view)}")
    except sqlite3.Error:
        return {EVERY_TABLE}
    return {first for action, first, _ in events if action == sqlite3.SQLITE_READ} - {view}


def _trigger_flows(scratch, events, table):
    """{table written: what flows into it} for the triggers on `table`, as the
    authorizer sees an insert, an update of every column and a delete of it prepared;
    None when one of them cannot be."""
    columns = [row[1] for row in scratch.execute(f"pragma table_info({_quoted(table)})")]
    setting = ", ".join(f"{_quoted(c)} = {_quoted(c)}" for c in columns) or "rowid = rowid"
    reads, writes = defaultdict(set), defaultdict(set)
    for statement in (
        f"insert into {_quoted(table)} default values",
        f"update {_quoted(table)} set {setting}",
        f"delete from {_quoted(table)}",
    ):
        events.clear()
        try:
            scratch.execute(f"explain {statement}")
        except sqlite3.Error:
            return None
        for action, first, source in events:
            if source is not None and action == sqlite3.SQLITE_READ:
                reads[source].add(first)
            elif source is not None and action in _WRITES:
                writes[source].add(first)
    told = defaultdict(set)
    for trigger, written in writes.items():
        for target in written:  # its own table too: a trigger may write into it what it reads of others
            told[target] |= (reads[trigger] | {table}) - {target}
    return told


def _make_table(conn, scratch, name, sql):
    """Table `name` in `scratch`: as its SQL makes it (its keys, for the upserts of
    triggers), else (a virtual table, `sql` None) with its columns alone."""
    if sql is not None:
        try:
            scratch.execute(sql)
            return
        except sqlite3.Error:
            pass
    try:
        columns = [row[1] for row in conn.execute(f"pragma main.table_xinfo({_quoted(name)})")]
    except sqlite3.Error:  # a module not loaded here: its columns unknown
        columns = []
    scratch.execute(f"create table {_quoted(name)} ({', '.join(map(_quoted, columns)) or 'x'})")


def _names(sql, name):
    """How many times `sql` names `name`, in any quoting or case."""
    return [_folded(_unquoted(token)) for token in _tokens(sql)].count(_folded(name))


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'
