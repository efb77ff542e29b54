"""Datasette's own pages on a brain, made to lead to the brain's: cells that link
to memory and entity pages, `[[wikilinks]]` that link to the entities they name,
the internal tables hidden, the knowledge table searchable and its useful
columns first, even with no metadata.

Stored text is escaped before anything is added to it; the only markup on these
pages is the <a> tags built here, around text that was escaped.
"""

import asyncio
import re
import urllib.parse
import weakref

from datasette.utils import tilde_decode
from markupsafe import Markup, escape

from brain_sql import for_plugin

from . import tools

_brains = weakref.WeakKeyDictionary()  # Datasette instance -> the names of its brain databases

# the tables people have no use for: vec0's and FTS5's internals (every table whose
# name starts with one of these is hidden too), the change log and bookkeeping, and
# Litestream's own tables in a brain it replicates
HIDDEN_TABLES = (
    "vec_knowledge",
    "knowledge_fts",
    "brain_changes",
    "brain_instance",
    "brain_mention_queue",
    "brain_mention_names",
    "brain_ids",
    "brain_meta",
    "sqlite_sequence",
    "_sqlite_migrations",
    "_litestream_seq",
    "_litestream_lock",
)


def is_hidden_table(table):
    """Whether `table` is one of a brain's internals (HIDDEN_TABLES, or named for one)."""
    return table.startswith(HIDDEN_TABLES)


# the knowledge table's columns as people read them; the rest follow, as stored
KNOWLEDGE_COLUMNS = (
    "id",
    "title",
    "content",
    "class",
    "scope",
    "source",
    "domain",
    "observed_at",
    "expires_at",
    "relevance_tier",
    "flagged",
    "confidence",
    "tags",
    "heading_path",
    "source_path",
    "line_start",
    "line_end",
    "external_id",
)

# what a phone shows of a knowledge row, its card; the memory page has the rest
PHONE_COLUMNS = ("id", "title", "content", "class", "scope", "source", "observed_at", "expires_at")

CONTENT_CHARS = 160  # of a memory's text in a table cell; the memory page has all of it
LINK_SLACK = 200  # characters a cut text may run past its limit to end a [[link]] rather than cut it

# the columns the recall canned query returns: its rows are memories
RECALL_COLUMNS = {"id", "title", "score", "vector_rank", "fts_rank", "graph_rank", "content"}


async def remember_brains(datasette):
    """Note which of `datasette`'s databases are brains: the hooks below that
    cannot wait for a query (metadata) read this; returns them."""
    brains = _brains[datasette] = frozenset(await tools.brain_names(datasette))
    return brains


def is_brain(datasette, database):
    return database in _brains.get(datasette, ())


# Datasette's row and table routes: database, table (and key), none holding a dot, and a format
ROW_PATH = re.compile(r"^/(?P<database>[^/.]+)/(?P<table>[^/.]+)/(?P<key>[^/.]+)(\.\w+)?$")
TABLE_PATH = re.compile(r"^/(?P<database>[^/.]+)/(?P<table>[^/.]+)(\.\w+)?$")


def _brain_route(datasette, scope, route):
    """The match of `route` (ROW_PATH, TABLE_PATH) and the database of a request for a
    brain's table or row, read as Datasette's router reads them (the raw path, base_url
    off; its parts still tilde-encoded); else None."""
    raw = scope.get("raw_path")
    path = (raw.decode("latin-1") if raw else scope.get("path") or "").partition("?")[0]
    base = datasette.setting("base_url")
    if base != "/" and path.startswith(base):
        path = "/" + path[len(base) :]
    match = route.match(path)
    if not match:
        return None
    try:
        db = datasette.get_database(route=tilde_decode(match["database"]))
    except KeyError:
        return None
    if not is_brain(datasette, db.name):
        return None
    return match, db


def _brain_row(datasette, scope):
    """(database, table, key) of a request for a row of a brain's table; else None."""
    found = _brain_route(datasette, scope, ROW_PATH)
    if found is None:
        return None
    match, db = found
    return db, tilde_decode(match["table"]), match["key"]


def is_brain_table(datasette, scope):
    """Whether `scope` asks for one of a brain's own tables: its page, JSON or CSV."""
    found = _brain_route(datasette, scope, TABLE_PATH)
    return found is not None and for_plugin.brain_table(tilde_decode(found[0]["table"]))


def is_recall_query(datasette, scope):
    """Whether `scope` asks for a brain's recall canned query (canned.RECALL_SQL): its
    page, JSON or CSV."""
    return recall_query_database(datasette, scope) is not None


def recall_query_database(datasette, scope):
    """The brain whose recall canned query `scope` asks for; else None."""
    found = _brain_route(datasette, scope, TABLE_PATH)
    return found[1] if found is not None and tilde_decode(found[0]["table"]) == "recall" else None


def without_link_counts(datasette, scope):
    """`scope` of a request for a row of a brain's table, less `foreign_key_tables` in
    any `_extras` (the counts of rows pointing at it, read from tables the actor may
    not read), however the query spells it."""
    query = scope.get("query_string") or b""
    if not query or _brain_row(datasette, scope) is None:
        return scope
    pairs = urllib.parse.parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    if not any(name == "_extras" and "foreign_key_tables" in value for name, value in pairs):
        return scope
    kept = [
        (
            name,
            ",".join(extra for extra in value.split(",") if extra.strip() != "foreign_key_tables")
            if name == "_extras"
            else value,
        )
        for name, value in pairs
    ]
    return {**scope, "query_string": urllib.parse.urlencode(kept).encode("latin-1")}


async def key_of_wrong_length(datasette, scope):
    """Whether `scope` asks for a row of a brain's table by a key whose parts are not as
    many as the table's primary key columns."""
    row = _brain_row(datasette, scope)
    if row is None:
        return False
    db, table, key = row
    if not for_plugin.brain_table(table):
        return False
    try:
        columns = await db.primary_keys(table)
    except Exception:  # noqa: BLE001 - no such table, a damaged file: Datasette's view answers it
        return False
    return len(key.split(",")) != max(len(columns), 1)


def memory_url(datasette, database, memory_id):
    return f"{datasette.urls.database(database)}/-/memory/{int(memory_id)}"


def entity_url(datasette, database, entity_id):
    return f"{datasette.urls.database(database)}/-/entity/{int(entity_id)}"


def link(href, text, css_class=None):
    """<a href>text</a>, `text` escaped."""
    attribute = f' class="{css_class}"' if css_class else ""
    return Markup(f'<a href="{escape(href)}"{attribute}>{escape(text)}</a>')


def metadata(datasette, key=None, database=None, table=None):
    """What Datasette's metadata says of each brain database unless metadata.yml
    says otherwise: internals hidden, full-text search on the knowledge table, and
    an entity labelled by its id. A fresh dictionary each time: Datasette merges the
    next source into it.

    Datasette reads a database's `tables` in place of the instance's, so this block
    would hide the instance-level table permissions (a deny of `knowledge` for every
    database) from every brain: a brain given no `tables` of its own gets the
    instance's `allow` rules in it, from the operator's metadata and other plugins'
    (asked here directly: Datasette's metadata() would ask this hook again). Only
    `allow`: the instance's other table keys apply to no database's table."""
    # in Datasette's order: the plugins' metadata, then the operator's, which wins
    sources = [
        *_other_metadata(datasette=datasette, key=key, database=database, table=table),
        getattr(datasette, "_metadata_local", None) or {},
    ]
    # table, in lower case -> (its name as last spelled, its allow block: each source's keys over the one's
    # before, names matched in any case, as Datasette merges its sources)
    instance: dict = {}
    own = set()
    for source in sources:
        if not isinstance(source, dict):
            continue
        given: dict = source["tables"] if isinstance(source.get("tables"), dict) else {}
        for name, config in given.items():
            if isinstance(config, dict) and "allow" in config:
                folded = name.translate(_ASCII_CASE) if isinstance(name, str) else name  # as SQLite matches names
                before, allow = instance.pop(folded, (None, None))[1], config["allow"]
                merged = {**before, **allow} if isinstance(before, dict) and isinstance(allow, dict) else allow
                instance[folded] = (name, merged)
        databases: dict = source["databases"] if isinstance(source.get("databases"), dict) else {}
        own.update(name for name, block in databases.items() if isinstance(block, dict) and "tables" in block)
    found = {}
    for name in _brains.get(datasette, ()):
        tables: dict = {
            **{table: {"hidden": True} for table in HIDDEN_TABLES},
            "knowledge": {"fts_table": "knowledge_fts", "fts_pk": "id"},
            # Datasette labels a foreign key (relationships.to_entity_id, documents.entity_id)
            # with the row it names, on table pages, with _labels and in facets, whoever
            # asks: nothing on that path is told who does. Whoever may read `relationships`
            # but not `entities` is shown no names so: the id is its own label, for everyone
            "entities": {"label_column": "id"},
        }
        if name not in own:
            for table_name, allow in instance.values():
                tables[table_name] = {**tables.get(table_name, {}), "allow": allow}
        found[name] = {"tables": tables}
    return {"databases": found}


_ASCII_CASE = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _other_metadata(**arguments):
    """What the other plugins' get_metadata hooks give for these arguments (none asked
    when there is none: Datasette asks this hook for every lookup of its metadata)."""
    others = tools.other_plugins("get_metadata")
    return others(**arguments) if others else []


# rendering text


async def entity_ids(db, names):
    """{name as given: entity id} of the names that are entities (names match in any case)."""
    names = sorted(set(names))
    if not names:
        return {}
    found = await db.execute(f"select id, name from entities where name in ({', '.join('?' for _ in names)})", names)
    ids = {row["name"].casefold(): row["id"] for row in found.rows}
    return {name: ids[name.casefold()] for name in names if name.casefold() in ids}


def _flat(text):
    return re.sub(r"\s+", " ", text)


def whole_links(text, at):
    """Where to cut `text` near `at` so that no `[[link]]` is cut in half: at the end
    of the one `at` falls inside (if it ends within LINK_SLACK), else at its start."""
    opened = text.rfind("[[", 0, at)
    if opened < 0 or text.find("]]", opened, at) >= 0:
        return at
    closed = text.find("]]", at - 1, at + LINK_SLACK)
    if closed >= 0 and "\n" not in text[opened:closed]:
        return closed + 2
    return opened


async def linked_text(datasette, database, text, limit=None, more_href=None, entities=True):
    """Markup for `text`: escaped, each `[[wikilink]]` or `[[relation::Entity]]` that
    names an entity wrapped, as written, in a link to that entity's page (unless
    not `entities`: for a reader who may not see the graph). With `limit`, the
    first `limit` characters on one line (with the whole of a link they would cut),
    then a link to the rest."""
    shown = text[: whole_links(text, limit)] if limit is not None and len(text) > limit else text
    cut = len(shown) < len(text)
    spans = for_plugin.entity_links(shown) if entities else []
    ids = await entity_ids(datasette.get_database(database), [name for _, _, name in spans]) if spans else {}
    plain = _flat if limit is not None else str
    parts, at = [], 0
    for start, end, name in spans:
        if name not in ids:
            continue
        parts.append(escape(plain(shown[at:start])))
        parts.append(link(entity_url(datasette, database, ids[name]), shown[start:end], "brain-entity-link"))
        at = end
    parts.append(escape(plain(shown[at:])))
    if cut:
        parts.append(Markup("… ") + link(more_href, "more", "brain-more") if more_href else Markup("…"))
    return Markup("").join(parts)


# render_cell


_graph_public = weakref.WeakKeyDictionary()  # the task serving a request -> {database: may anyone see the graph}


async def _content_cell(datasette, database, text, href):
    # render_cell is not told who is reading: entities link only where anyone may see the
    # graph, asked once a request (its task renders every cell) rather than once a cell
    entities = await tools.once_for(
        asyncio.current_task(), _graph_public, database, lambda: tools.graph_readable(datasette, None, database)
    )
    return await linked_text(datasette, database, text, CONTENT_CHARS, href, entities)


def _value_and_label(value):
    """A cell's value and what to show for it: Datasette expands a foreign key
    into {"value", "label"}."""
    if isinstance(value, dict):
        return value.get("value"), value.get("label") or value.get("value")
    return value, value


def _as_id(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def render_cell(row, value, column, table, database, datasette):
    """The cell's markup, or None for Datasette's own rendering; an awaitable
    where entities must be looked up."""
    if value is None or not is_brain(datasette, database):
        return None
    if table is None and RECALL_COLUMNS <= set(row.keys()):
        if column == "score" and isinstance(value, float):
            return f"{value:.4f}"
        table = "knowledge"  # the recall canned query's rows are memories
    if table == "knowledge":
        memory_id = _as_id(row["id"])
        if memory_id is None:
            return None
        href = memory_url(datasette, database, memory_id)
        if column in ("id", "title"):
            return link(href, value if value != "" else "(untitled)")
        if column == "content" and isinstance(value, str):
            return _content_cell(datasette, database, value, href)
        return None
    if (table, column) in (("entities", "name"), ("entities", "id")):
        entity_id = _as_id(row["id"])
        return None if entity_id is None else link(entity_url(datasette, database, entity_id), value)
    target = {
        ("relationships", "from_entity_id"): entity_url,
        ("relationships", "to_entity_id"): entity_url,
        ("documents", "entity_id"): entity_url,
        ("relationships", "knowledge_id"): memory_url,
    }.get((table, column))
    if target is None:
        return None
    key, label = _value_and_label(value)
    key = _as_id(key)
    return None if key is None else link(target(datasette, database, key), label)


# the table page: columns in order, and its row links to the brain's pages


def table_arranger(datasette, database, table):
    """A function (display_columns, display_rows) -> the same, for the table
    template: the knowledge table's useful columns first, and the link each row
    starts with leading to the memory or entity page rather than the row page."""
    if not is_brain(datasette, database) or table not in ("knowledge", "entities"):
        return lambda columns, rows: (columns, rows)
    page = memory_url if table == "knowledge" else entity_url
    order = KNOWLEDGE_COLUMNS if table == "knowledge" else ()

    def rank(name):
        return order.index(name) if name in order else len(order)

    def arrange(columns, rows):
        names = [column["name"] for column in columns]
        ordered = sorted(range(len(names)), key=lambda i: (rank(names[i]), i))
        arranged_rows = []
        for row in rows:
            cells = [dict(cell) for cell in row]
            for cell in cells:
                if cell.get("value_type") == "pk" and not cell.get("is_special_link_column"):
                    key = _as_id(cell.get("raw"))
                    if key is not None:
                        cell["value"] = link(page(datasette, database, key), key)
            arranged_rows.append([cells[i] for i in ordered] if len(cells) == len(names) else cells)
        return [columns[i] for i in ordered], arranged_rows

    return arrange


def phone_columns(datasette, database, table, request):
    """The columns a phone shows of the table page's rows, or None for all: of the
    knowledge table, PHONE_COLUMNS and those the request filters or sorts by,
    unless it picks its columns itself (_col, _nocol)."""
    if not is_brain(datasette, database) or table != "knowledge" or request is None:
        return None
    if "_col" in request.args or "_nocol" in request.args:
        return None
    named = {key.split("__")[0] for key in request.args if not key.startswith("_")}
    named.update(request.args.get(key) for key in ("_sort", "_sort_desc") if request.args.get(key))
    return frozenset(PHONE_COLUMNS).union(named)
