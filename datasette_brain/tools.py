"""What an agent may do with a brain — recall, remember, verify, forget, read one
memory — each checking the caller's permissions as Datasette would and returning
plain JSON. The HTTP routes and the MCP tools are two doors to these same
functions, so they cannot answer differently.
"""

import asyncio
import json
import os
import threading
import weakref
from pathlib import Path

from datasette import Forbidden
from datasette.utils import actor_matches_allow, await_me_maybe, sqlite3, tilde_decode

import brain_sql
from brain_sql import for_plugin

MAX_BODY_BYTES = for_plugin.MAX_CONTENT_BYTES + 100_000  # a request's body, or an MCP call's arguments
WRITE_PERMISSION = "brain-write"
# how an actor gets it, said wherever it is missing
WRITE_HOW = (
    "the plugin's configuration grants it to the actors it names, e.g. plugins: "
    "{datasette-brain: {allow_write: {id: you}}} in the metadata; sign in as one of them, "
    "or send a token that acts as one (datasette-auth-tokens)"
)
RETRY_AFTER_SECONDS = 2
RECALL_WAIT_SECONDS = 5


class ApiError(Exception):
    """A request that cannot be answered as asked: its message, HTTP status and headers."""

    def __init__(self, message, status=400, headers=None):
        super().__init__(message)
        self.status, self.headers = status, headers


def as_api_error(ex, db=None):
    """The ApiError (message, status, headers) an exception means to a caller, or
    None for one that is not the caller's to see (a bug: let it surface). `db`: the
    database it was about, whose damage a replica mends otherwise."""
    if isinstance(ex, ApiError):
        return ex
    if isinstance(ex, brain_sql.InputError):
        return ApiError(str(ex))
    if isinstance(ex, Forbidden):
        return ApiError(str(ex) or "permission denied", 403)
    if isinstance(ex, brain_sql.ReadOnlyBrain):
        return ApiError(str(ex), 403)
    if isinstance(ex, brain_sql.ReplicaNotReady):  # a replica catching up after its follower restarted
        return ApiError(str(ex), 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(ex, brain_sql.WriteError):
        return ApiError(str(ex), 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(ex, brain_sql.WrongKind):  # its rows and values may be any caller's: named by check, not here
        return ApiError(for_plugin.damage_advice(db.path if db else None, ex.public), 409)
    if isinstance(ex, brain_sql.BrainError):  # the file's state (damaged, another model): not the request's fault
        return ApiError(for_plugin.damage_advice(db.path if db else None, str(ex)), 409)
    return None


def error_body(message, status):
    """The JSON every error answers with, over HTTP and MCP alike."""
    return {"ok": False, "error": message, "status": status}


def too_large(what, limit=MAX_BODY_BYTES):
    """The 413 for a body, or an MCP call's arguments, past `limit` bytes."""
    return ApiError(f"{what} is larger than the limit; the limit is {limit:,} bytes", 413)


def read_json(data, what="the request body"):
    """The JSON value in `data` (bytes): a request's body, or an MCP call's arguments
    as they arrived, held to the same rules whichever door they came in by. Refused
    (400, 413) when too large, not JSON (NaN and Infinity included, numbers past
    Python's digit limit), nested too deeply, or holding text that is not valid
    Unicode (a lone surrogate, which a \\ud800 escape makes), or giving a key twice in
    one object (one value taken and another dropped would answer what was not asked)."""
    if len(data) > MAX_BODY_BYTES:
        raise too_large(what)
    try:
        value = for_plugin.loads_json(data or b"null", unique_keys=True)
    except brain_sql.FieldError as ex:  # a key given twice
        raise ApiError(f"{what}: {ex}") from None
    except ValueError as ex:  # not JSON, not UTF-8, or a number past Python's digit limit
        raise ApiError(f"{what} is not valid JSON: {ex}") from None
    except RecursionError:
        raise ApiError(f"{what} is nested too deeply") from None
    bad = for_plugin.unencodable(value)
    if bad is not None:
        raise ApiError(f"{what} has text that is not valid Unicode (a lone surrogate) in {for_plugin.shown(bad)}")
    return value


def url_database(datasette, request):
    """The name of the database a route's URL names, read as Datasette's own routes
    read it: tilde-decoded, then looked up by route (team.notes.db is /team~2Enotes);
    a route no database has, as decoded (its "database not found" names it)."""
    route = request.url_vars.get("database")
    if route is None:
        return None
    route = tilde_decode(route)
    try:
        return datasette.get_database(route=route).name
    except KeyError:
        return route


def only(request, *methods, usage=None):
    """Refuse a request by a method the route does not take: a 405 naming those it
    takes (Allow); HEAD is a GET's, OPTIONS a preflight's (routes.answering_errors).
    A DELETE of a memory's URL answered 200 with the memory, deleting nothing
    (review 112)."""
    if ("GET" if request.method == "HEAD" else request.method) not in methods:
        usage = usage or f"{' or '.join(methods)} this URL, not {request.method}"
        raise ApiError(usage, 405, {"Allow": ", ".join(methods)})


async def brain_names(datasette):
    """The brain databases served."""
    return [name for name in list(datasette.databases) if await is_brain(datasette, name)]


async def is_brain(datasette, name):
    """Whether database `name` is a brain; a damaged file counts, so that what is
    asked of it says it is damaged. A WriteError (a 503) when it cannot be told now:
    another process's lock held past the busy timeout (review 112), a failing disk."""
    db = datasette.databases.get(name)
    if db is None or name == "_internal":
        return False
    try:
        return bool(await db.execute_fn(brain_sql.is_brain))
    except brain_sql.BrainError:
        return True
    except sqlite3.OperationalError as ex:
        if db.is_mutable and "unable to open database file" in str(ex):
            raise brain_sql.ReadOnlyBrain(
                f"{db.path} cannot be opened for writing: the file, its folder or its filesystem is "
                "read-only, and SQLite keeps a written database's -wal and -shm files beside it. "
                f"Serve it immutable instead: datasette -i {db.path}"
            ) from ex
        fault = for_plugin.opening_fault(db.path or name, ex)
        if isinstance(fault, brain_sql.WriteError):  # another's lock held past the busy timeout, a failing disk
            raise fault from ex
        raise


async def open_brain(datasette, actor, name=None, db=None, ready=True):
    """The brain database `name` names (or the only one), once `actor` may read it;
    `db` when a route opened it already for this actor. A replica catching up after
    its follower restarted is not read (a 503) unless `ready` is False."""
    if db is not None:
        return db
    if name is not None and not isinstance(name, str):
        raise ApiError("database must be a string: the name of a brain database")
    if name is None:
        # only the brains whose memories `actor` may read count, and only those are
        # named; denied every one, the actor is refused as at each brain's own routes
        names, refusal = [], None
        for brain in await brain_names(datasette):
            try:
                await ensure_permissions(datasette, actor, brain, memory_permissions(brain))
            except Forbidden as ex:
                refusal = refusal or ex  # the permission it lacks, as its own routes say
                continue
            except ApiError:
                pass  # too damaged to tell: opening it says so
            names.append(brain)
        if refusal is not None and not names:
            raise refusal
        if not names:
            raise ApiError("this instance has no brain database", 404)
        if len(names) > 1:
            raise ApiError(f"this instance has {len(names)} brain databases: name one ({', '.join(names)})", 400)
        name = names[0]
    if name not in datasette.databases or name == "_internal":
        raise ApiError(f"database not found: {name}", 404)
    await ensure_permissions(datasette, actor, name, memory_permissions(name))
    db = datasette.get_database(name)
    if not await db.execute_fn(brain_sql.is_brain):
        raise ApiError(f"database {name} is not a brain: create one with sqlite-utils brain init", 404)
    if ready and db.path:
        for_plugin.ensure_ready(db.path)
    return db


def memory_permissions(name):
    """What reading brain `name`'s memories takes, as Datasette's ensure_permissions
    checks it: memories are the knowledge table's rows, and whoever may not see it
    reads nothing."""
    return [("view-table", (name, "knowledge")), ("view-database", name), "view-instance"]


async def memories_readable(datasette, actor, name):
    """Whether `actor` may read brain `name`'s memories (not when it is too damaged to tell)."""
    try:
        await ensure_permissions(datasette, actor, name, memory_permissions(name))
    except (Forbidden, ApiError):
        return False
    return True


async def ensure_permissions(datasette, actor, name, permissions):
    """Datasette's ensure_permissions; its refusal, which is only the permission's
    name, says what may not be viewed; a file too damaged for Datasette to find its
    tables is a 409 that says so, not a 500; a lock held or a full disk, a 503 to try again."""
    try:
        await datasette.ensure_permissions(actor, permissions)
    except sqlite3.DatabaseError as ex:
        fault = for_plugin.opening_fault(name, ex)
        if isinstance(fault, brain_sql.WriteError):
            raise as_api_error(fault) from ex
        raise ApiError(f"database {name} is damaged ({ex}): run sqlite-utils brain check", 409) from ex
    except Forbidden as ex:
        raise Forbidden(_refusal(permissions, str(ex))) from None


def _refusal(permissions, action):
    """Datasette's refusal `action` (a permission's name) with what it refused: 'view-table:
    you may not view the knowledge table' (naming no database: a caller refused them all
    learns none of their names)."""
    tables = [
        resource[1]
        for permission in permissions
        if isinstance(permission, tuple) and permission[0] == action
        for resource in [permission[1]]
        if isinstance(resource, tuple)
    ]
    what = {
        "view-table": f"the {', '.join(tables)} table{'s' if len(tables) > 1 else ''}",
        "view-database": "this database",
        "view-instance": "this instance",
    }.get(action)
    return f"{action}: you may not view {what}" if what else action


async def ensure_graph(datasette, actor, name):
    """The graph pages' permission: view on every one of the graph's tables."""
    await ensure_tables(datasette, actor, name, for_plugin.GRAPH_TABLES)


async def ensure_tables(datasette, actor, name, tables):
    """Refuse `actor` (403, naming the table) unless it may view each of `tables` of
    database `name`, as Datasette's table view decides each (first_denied)."""
    denied = await first_denied(datasette, actor, name, tables)
    if denied is not None:
        raise Forbidden(f"view-table: you may not view the {denied} table")


async def first_denied(datasette, actor, name, tables):
    """The first of `tables` of database `name` that `actor` may not view, or None. Each
    is decided as Datasette's table view decides it: the table's own verdict, else the
    database's, else the instance's (a private database with one table opened opens no
    other), a shadow table's its virtual table's; one denied refuses, where
    ensure_permissions over a list takes the first verdict of any."""
    database = await datasette.permission_allowed(actor, "view-database", name, default=None)
    if database is None:
        database = await datasette.permission_allowed(actor, "view-instance", default=None)
    others, verdicts = _other_hooks(), {}
    named: list[set[str]] = []  # the tables the metadata names, once asked

    async def verdict_of(table):
        if table not in verdicts:
            stored = for_plugin.stored_for(table)
            if stored and not named:
                named.append(_named_in_metadata(datasette, name))
            # a shadow table the metadata names no rule for: Datasette's rules say nothing of it
            # (asking them costs a deep copy of the metadata a table), other plugins' may
            hooks = _other_hooks(beyond_metadata=True) if stored and table.lower() not in named[0] else others
            verdicts[table] = await _table_verdict(hooks, datasette, actor, name, table) if hooks else None
        return verdicts[table]

    for table in tables:
        verdict = await verdict_of(table)
        stored = for_plugin.stored_for(table)
        if verdict is None and stored:  # a table a virtual table's module keeps it in is that table
            verdict = await verdict_of(stored)
        if (database if verdict is None else verdict) is False:
            return table
    return None


async def graph_readable(datasette, actor, database, memories=None):
    """Whether `actor` may see the graph: its entities, relationships and documents,
    which follow `knowledge` too (asked once, unless `memories` says open_brain asked
    it already, then each table's own verdict)."""
    if memories is None:
        memories = await datasette.permission_allowed(actor, "view-table", (database, "knowledge"), default=True)
    if not memories:
        return False
    return await first_denied(datasette, actor, database, for_plugin.GRAPH_TABLES) is None


async def tables_readable(datasette, actor, name):
    """Whether `actor` may read every table of database `name` that is a brain's: every
    table of a brain, and for a file that is none (yet: one served empty and ingested
    into later) the tables a brain has. SQL on a database reads any of its tables, and
    a brain's SQL functions read the graph: SQL of it (its own, its canned queries',
    another's through --crossdb) is for whoever may read them all."""
    db = datasette.databases.get(name)
    if db is None:
        return True
    if not await memories_readable(datasette, actor, name):
        return False
    tables = set(for_plugin.BRAIN_TABLES)
    if await is_brain(datasette, name):
        try:
            tables.update(await db.execute_fn(_table_names))  # not db.table_names(): the SQL time limit may cut it
        except sqlite3.DatabaseError:
            return True  # too damaged to list its tables: its memories decide, as the pages do
    tables.discard("knowledge")
    return await first_denied(datasette, actor, name, sorted(tables)) is None


async def links_readable(datasette, actor, database, table):
    """A filter of Datasette's row-page links (its foreign_key_tables) to the tables that
    `actor` may read: each link counts rows of its table."""
    incoming = (await datasette.get_database(database).get_all_foreign_keys()).get(table, {}).get("incoming", [])
    readable = set()
    for other in {link["other_table"] for link in incoming}:
        visible, _ = await datasette.check_visibility(
            actor, permissions=[("view-table", (database, other)), ("view-database", database), "view-instance"]
        )
        if visible:
            readable.add(other)
    return lambda links: [link for link in links if link["other_table"] in readable]


def _table_names(conn):
    return [name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")]


async def _table_verdict(others, datasette, actor, name, table):
    """view-table of one of a database's tables, named as SQLite spells it, as the
    `others` permission_allowed hooks answer it (the last that has an opinion, as
    Datasette takes them): Datasette's permission_allowed would ask SQLite for each
    table's spelling first, a query a table (one a time limit may cut). This plugin's
    own hook is left out: its only view-table rule makes the tables derived from
    `knowledge` follow it, and the callers ask `knowledge` first."""
    verdict = None
    for check in others(datasette=datasette, actor=actor, action="view-table", resource=(name, table)):
        check = await await_me_maybe(check)
        if check is not None:
            verdict = check
    return verdict


def _rules_beyond_metadata():
    """Whether a plugin other than this one and Datasette's default permissions (its
    metadata's allow blocks) answers permission_allowed: its rules may name any table."""
    return _other_hooks(beyond_metadata=True) is not None


_DEFAULT_PERMISSIONS = "datasette.default_permissions"


def _other_hooks(beyond_metadata=False):
    """The permission_allowed hooks of every plugin but this one (and, `beyond_metadata`,
    but Datasette's default permissions too), to be called as one; None when there is none."""
    return other_plugins("permission_allowed", (_DEFAULT_PERMISSIONS,) if beyond_metadata else ())


def other_plugins(hook, without=()):
    """Hook `hook` of every plugin but this one and those named `without`, to be called
    as one; None when there is none. Made again only when the plugins registered
    change (pluggy's subset asks each plugin for the hook by name: on this package, a
    module lookup each time)."""
    from datasette.plugins import pm  # loading it loads every plugin, this one too: not while this module loads

    impls = tuple(getattr(pm.hook, hook).get_hookimpls())
    key = (hook, without)
    if key not in _callers or _callers[key][0] != impls:
        module = f"{__package__}.plugin"
        left = [i.plugin for i in impls if i.function.__module__ == module or i.plugin_name in without]
        caller = pm.subset_hook_caller(hook, remove_plugins=left) if len(impls) > len(left) else None
        _callers[key] = (impls, caller)
    return _callers[key][1]


_callers: dict = {}  # (hook, plugins left out) -> (the hooks registered, the caller of the others)


_recall_slots = weakref.WeakKeyDictionary()  # Datasette instance -> {event loop: its semaphore}


async def run_recall(datasette, db, doc, actor, indexes_checked=False):
    """brain_sql.recall for `doc` (run_read), as `actor` may see it: without the
    graph for an actor who may not read its tables; refused (403) to one who may not
    read the full-text or vector index its lexical and vector legs search (unless
    the caller checked that, before reading the request's body)."""
    if not indexes_checked:
        await ensure_indexes(datasette, actor, db)
    graph_visible = await graph_readable(datasette, actor, db.name, memories=True)  # open_brain asked
    return await run_read(datasette, db, lambda conn: brain_sql.recall(conn, doc, graph_visible=graph_visible))


async def ensure_indexes(datasette, actor, db):
    """Refuse recall (403) to whoever may not view the full-text or the vector index,
    or one of the tables their modules keep them in (knowledge_fts_vocab, the vectors'
    chunks...): recall's lexical and vector legs read them."""
    indexes = for_plugin.VIRTUAL_TABLES
    await ensure_tables(datasette, actor, db.name, [*indexes, *await kept_in(datasette, db, indexes)])


async def once_for(owner, memo, key, compute):
    """`await compute()`, once for each `key` while `owner` lives (a request, or the
    task serving it): what a page asks of every row, facet or table, asked once a page.
    `memo` is a weakref.WeakKeyDictionary."""
    found = memo.setdefault(owner, {})
    if key not in found:
        found[key] = await compute()
    return found[key]


_index_verdicts = (
    weakref.WeakKeyDictionary()
)  # the task serving a request -> {(Datasette, actor, database, index): readable}


async def index_readable(datasette, actor, name, index):
    """Whether `actor` may view virtual table `index` of database `name` and every table
    its module keeps it in that a rule names (first_denied): each of them reads the
    others. Asked once a request: a page listing the tables asks it of each of them."""

    async def readable():
        db = datasette.databases.get(name)
        tables = [index, *await kept_in(datasette, db, [index])] if db is not None else [index]
        return await first_denied(datasette, actor, name, tables) is None

    key = (datasette, json.dumps(actor, sort_keys=True, default=repr), name, index)
    return await once_for(asyncio.current_task(), _index_verdicts, key, readable)


async def kept_in(datasette, db, indexes):
    """The tables of `db` that virtual tables `indexes` are kept in (named after them:
    knowledge_fts_data, vec_knowledge_rowids...) and that a rule may name: where only
    Datasette's metadata gives rules (no other plugin's permission hook), those the
    metadata names (a name no table has is no rule of this database's); else every one."""
    prefixes = tuple(index.lower() + "_" for index in indexes)  # SQLite's names match in any case
    named = None
    if not _rules_beyond_metadata():
        named = {table for table in _named_in_metadata(datasette, db.name) if table.startswith(prefixes)}
        if not named:
            return []
    try:
        names = await db.execute_fn(_table_names)  # not db.table_names(): the SQL time limit may cut it
    except sqlite3.DatabaseError:
        return []  # too damaged to list: the indexes themselves decide, and recall says what is wrong
    return sorted(
        name for name in names if name.lower().startswith(prefixes) and (named is None or name.lower() in named)
    )


def _named_in_metadata(datasette, name):
    """The tables (lower case) Datasette's metadata gives a block of database `name`, or of every database."""
    named = {*(datasette.metadata("tables", database=name) or {}), *(datasette.metadata("tables") or {})}
    return {table.lower() for table in named}


async def run_read(datasette, db, operation):
    """operation(conn) — a recall, a listing, a remember's reading — on one of Datasette's
    threads, in a read slot (in_read_slot)."""
    return await in_read_slot(datasette, lambda: db.execute_fn(operation))


async def in_read_slot(datasette, work):
    """await work() — a recall, a listing, an embedding batch, a remember's reading and
    embedding: work for one of Datasette's threads — at most one fewer at once than it
    has (`num_sql_threads`), so table pages
    always find a thread free; waiting work goes first come, first served, and work
    that finds no slot within RECALL_WAIT_SECONDS is a 503 with Retry-After."""
    loop = asyncio.get_running_loop()
    per_loop = _recall_slots.setdefault(datasette, weakref.WeakKeyDictionary())
    slots = per_loop.get(loop)
    if slots is None:
        slots = per_loop[loop] = asyncio.Semaphore(max(1, datasette.setting("num_sql_threads") - 1))
    try:
        await asyncio.wait_for(slots.acquire(), RECALL_WAIT_SECONDS)
    except asyncio.TimeoutError:
        raise ApiError(
            "the server is busy with other recalls, listings, embeddings and remembers; try again shortly",
            503,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        ) from None
    try:
        return await work()
    finally:
        slots.release()


async def recall(datasette, actor, database, doc, db=None):
    """Recall for a QueryDoc (or its JSON object)."""
    db = await open_brain(datasette, actor, database, db)
    if not isinstance(doc, brain_sql.QueryDoc):
        doc = brain_sql.parse_querydoc(doc)
    return await run_recall(datasette, db, doc, actor)


async def memories(datasette, actor, database, body, db=None):
    """What was stored, newest first: brain_sql.memories for a Listing or its JSON
    object (filters and paging), the memories `actor` may read."""
    db = await open_brain(datasette, actor, database, db)
    listing = brain_sql.parse_listing(body)
    return await run_read(datasette, db, lambda conn: brain_sql.memories(conn, listing))


_exports = weakref.WeakKeyDictionary()  # Datasette instance -> exports streaming now


def take_export_slot(datasette):
    """One of the brain_sql.for_plugin.EXPORTS_AT_ONCE exports a server streams at once, or a
    503 with Retry-After when none is free; returns what gives it back (once)."""
    if _exports.get(datasette, 0) >= for_plugin.EXPORTS_AT_ONCE:
        raise ApiError(
            f"the server is streaming {for_plugin.EXPORTS_AT_ONCE} exports already; try again shortly",
            503,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    _exports[datasette] = _exports.get(datasette, 0) + 1
    given_back = []

    def give_back():
        if not given_back:
            given_back.append(True)
            _exports[datasette] -= 1

    return give_back


async def exportable_brain(datasette, actor, database, db=None):
    """The brain, once `actor` may read its memories and its graph (an export holds
    both) and it is a file an export can open."""
    db = await open_brain(datasette, actor, database, db)
    try:
        await ensure_graph(datasette, actor, db.name)
    except Forbidden:
        raise Forbidden(
            "an export holds the graph too: it needs view permission on the knowledge, "
            f"{', '.join(for_plugin.GRAPH_TABLES)} tables"
        ) from None
    if not db.path:
        raise ApiError(f"database {db.name} is held in memory: only a brain file can be exported", 409)
    return db


async def verify(datasette, actor, database, body, db=None):
    """brain_verify for {claim, id} (a stored memory) or {claim, text}."""
    db = await open_brain(datasette, actor, database, db)
    if not isinstance(body, dict) or not isinstance(body.get("claim"), str):
        raise ApiError("give claim (a string) and either id or text")
    unknown = sorted(set(body) - {"claim", "id", "text"})
    if unknown:
        raise ApiError(f"unknown field: {', '.join(unknown)}")
    if ("id" in body) == ("text" in body):
        raise ApiError("give either id (a memory) or text, not both or neither")
    if "id" in body:
        _check_id(body["id"])
    if "text" in body and not isinstance(body["text"], str):
        raise ApiError("text must be a string")
    if len(body["claim"]) > for_plugin.MAX_QUERY_CHARS:
        raise ApiError(f"claim is {len(body['claim'])} characters; the limit is {for_plugin.MAX_QUERY_CHARS}")
    if "text" in body:  # a text of a million characters: work for a thread, not the server's loop
        return await run_read(datasette, db, lambda _: brain_sql.verify(body["claim"], body["text"]))
    result = await run_read(datasette, db, lambda conn: brain_sql.verify_memory(conn, body["claim"], body["id"]))
    if result is None:
        raise ApiError(f"no memory with id {body['id']}", 404)
    return result


def _check_id(value, name="id"):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise ApiError(f"{name} must be a memory's id, a positive whole number")


def file_writable(path):
    """Whether the file, and its folder (WAL's -shm and -wal files go there), can be written."""
    path = Path(path).resolve()
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def read_only(db):
    """Why nothing can be written to the Datasette database `db`, or None."""
    if db.path and for_plugin.is_copy(db.path):
        return f"database {db.name} is a read-only replica (a copy Litestream follows)"
    if not db.is_mutable:
        return f"database {db.name} is served immutable (datasette -i)"
    if db.path and not file_writable(db.path):
        return f"the file of database {db.name} is read-only (the file or its folder)"
    return None


async def writable_brain(datasette, actor, database, db=None):
    """The brain, once `actor` may read it and write to it and it can be written."""
    db = await open_brain(datasette, actor, database, db)
    if not await datasette.permission_allowed(actor, WRITE_PERMISSION, resource=db.name, default=False):
        raise Forbidden(f"changing memories needs the {WRITE_PERMISSION} permission: {WRITE_HOW}")
    reason = read_only(db)
    if reason:
        raise ApiError(f"{reason}: nothing can be written to it", 403)
    return db


WRITE_QUEUE_FLOOR_SECONDS = 1.0  # the least a write waits for its turn in Datasette's write queue


async def write(db, operation, bounded=True):
    """`operation(conn)` on the brain's write connection, Datasette's write thread.
    What it raises is raised here, to be answered as any error is, and only here:
    that thread also writes each exception it sees to stderr, which for `brain mcp`
    is the agent's log, not its answer. A write that waits for the thread longer
    than the busy timeout, behind others, is a 503 that writes nothing, as one
    waiting that long for the lock is: queued behind large remembers, a one-line
    remember waited 107 s and was a 201 (review 152). One the thread has begun
    is waited for: it holds the lock, and ends. Not `bounded`: the rest of a
    write already made, waited for however long its turn takes."""
    turn, guard = ["queued"], threading.Lock()

    def caught(conn):
        with guard:
            if turn[0] == "given up":
                return None, None
            turn[0] = "begun"
        try:
            return operation(conn), None
        except Exception as ex:  # noqa: BLE001 - handed to the caller, whatever it is
            return None, ex

    written = asyncio.ensure_future(db.execute_write_fn(caught, block=True))
    # at least a second: the write thread's start and its connection's opening are no other write's
    # turn (with a busy timeout of 1 ms an idle server's first write was a 503); 0, no wait for the
    # lock, leaves the queue unbounded, as before
    busy = for_plugin.busy_timeout_ms() / 1000
    timeout = max(busy, WRITE_QUEUE_FLOOR_SECONDS)
    try:
        result, failure = await asyncio.wait_for(asyncio.shield(written), timeout if busy and bounded else None)
    except asyncio.TimeoutError:
        with guard:
            if turn[0] == "queued":
                turn[0] = "given up"
                raise brain_sql.WriteError(
                    f"other writes held the brain for {timeout:g} s (the busy timeout) before this one's turn, "
                    "so it was not written: try again"
                ) from None
        result, failure = await written
    if failure is not None:
        raise failure
    return result


async def remember(datasette, actor, database, body, db=None):
    """Store a record or a list of records, as one transaction: all or none."""
    db = await writable_brain(datasette, actor, database, db)
    records = body if isinstance(body, list) else [body]
    if not records or not all(isinstance(r, dict) for r in records):
        raise ApiError("give a record object or a non-empty list of them")
    # read, checked and embedded on a read connection, in a read slot (a burst of large remembers
    # took every thread: a recall waited 31 s); the write thread (the write lock) only writes
    prepared = await run_read(datasette, db, lambda conn: for_plugin.prepare_remember(conn, records))
    report, ids = prepared.report, []
    if not report.errors:
        report, ids = await write(db, lambda conn: for_plugin.write_remember(conn, prepared))
        # the edges its text's names make that its transaction left: each step a write of its own,
        # so that writes queued meanwhile take their turns between them
        while report.unfinished and await write(
            db, lambda conn: for_plugin.finish_remember(conn, report), bounded=False
        ):
            pass
    if report.errors:
        raise ApiError("; ".join(e.message for e in report.errors))
    return report.answer(ids)


async def forget(datasette, actor, database, body, db=None):
    """Remove memories by {"ids": [...]} and/or {"external_ids": [...]}, with what
    was derived from them, as one transaction; says what it removed."""
    db = await writable_brain(datasette, actor, database, db)
    if not isinstance(body, dict) or not ({"ids", "external_ids"} & set(body)):
        raise ApiError('give {"ids": [memory ids]} and/or {"external_ids": [record _ids]}')
    unknown = sorted(set(body) - {"ids", "external_ids"})
    if unknown:
        raise ApiError(f"unknown field: {', '.join(unknown)}; forget takes ids and external_ids")
    ids, external_ids = body.get("ids", []), body.get("external_ids", [])
    graph_visible = await graph_readable(datasette, actor, db.name)
    result = await write(db, lambda conn: brain_sql.forget(conn, ids=ids, external_ids=external_ids))
    if not graph_visible:
        # its counts of the graph's tables' rows: how many entities went tells whether a
        # name was one already (one that no other memory names goes with the memory)
        result["removed"] = {name: n for name, n in result["removed"].items() if name not in for_plugin.GRAPH_TABLES}
    return {"ok": True, **result}


async def memory(datasette, actor, database, memory_id, db=None):
    """One visible memory with its document's other sections and, for whoever may
    see the graph, the edges its text stated."""
    db = await open_brain(datasette, actor, database, db)
    _check_id(memory_id)
    loaded = await db.execute_fn(lambda conn: brain_sql.memory(conn, memory_id))
    if loaded is None:
        raise ApiError(f"no memory with id {memory_id}", 404)
    found, siblings, edges = loaded
    if not await graph_readable(datasette, actor, db.name):
        edges = []
    return {
        "memory": found,
        "siblings": [dict(zip(("id", "chunk_index", "heading_path", "line_start", "line_end"), s)) for s in siblings],
        "edges": [
            {"from": {"id": a, "name": an}, "relation": r, "to": {"id": b, "name": bn}} for a, an, r, b, bn in edges
        ],
    }


def write_allowed(datasette, actor, database):
    """brain-write: denied unless the plugin's configuration grants it, e.g.
    plugins: {datasette-brain: {allow_write: {id: agent}}} (per instance or database).
    A setting that is no allow block is the server's misconfiguration: a 503 naming
    it (nothing is written until its operator mends it), never a guess at its meaning."""
    config = datasette.plugin_config("datasette-brain", database=database) or {}
    allow = config.get("allow_write") if isinstance(config, dict) else None
    if allow is None:
        return False
    if not _allow_block(allow):
        raise ApiError(
            f"the server's datasette-brain setting allow_write is malformed ({for_plugin.shown(allow, 60)}): "
            "it must be an allow block such as {id: agent}, or true or false; nothing can be written "
            "until the server's operator mends it",
            503,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return actor_matches_allow(actor, allow)


def _allow_block(allow):
    """Whether `allow` is what Datasette's allow blocks are: true, false, or
    {actor key: a value or a list of values}."""
    if isinstance(allow, bool):
        return True
    scalar = (str, int, float)
    return isinstance(allow, dict) and all(
        isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))
        for value in allow.values()
    )
