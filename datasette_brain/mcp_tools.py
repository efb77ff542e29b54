"""The brain's MCP tools: brain_recall, brain_remember, brain_verify, brain_forget,
brain_memory and brain_list. datasette-mcp serves them at /-/mcp with Datasette's
actor on every call (its register_mcp_tools hook); `sqlite-utils brain mcp DB` serves them
over stdio for an agent without a server. Each is a door to the same function in
tools.py as its HTTP route: the same permissions, the same checks, the same JSON.

The arguments reach tools.py as the JSON that arrived: each parameter is declared
as any JSON value (its schema still says the type the route expects), so the MCP
SDK never turns `true` into 1 or "2" into 2 where the route would refuse them,
and an error is the route's own JSON, as structured content. brain_recall's and
brain_list's parameters are their requests' fields (brain_sql.QUERY_FIELDS,
LISTING_FIELDS), with the help and bounds those define.
"""

import inspect
import json
import re
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

import brain_sql
from brain_sql import for_plugin

from . import replica, tools

ROUTES = {"brain_remember": "remember", "brain_forget": "forget"}  # a write tool's HTTP route, on a replica's primary
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
REMOVES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = (
    "A long-term memory. Call brain_recall with a question before answering from memory; "
    "each hit has its source, its relevance and why it was found, and an empty answer says why. "
    "Store what should be remembered with brain_remember (a record: text, title, optional _id "
    "to update it later), read one memory in full with brain_memory, check a claim against "
    "a memory with brain_verify, and remove memories with brain_forget; brain_list lists what was "
    "stored, newest first."
)


def json_arg(kind, description, **schema):
    """A parameter taking any JSON value, its schema saying what the route expects."""
    return Annotated[Any, Field(description=description, json_schema_extra={"type": kind, **schema})]


Database = json_arg("string", "the brain database to use; needed only when the server holds several")
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", tuple: "array"}


def field_arg(field):
    """A request's field (brain_sql.QUERY_FIELDS, LISTING_FIELDS) as a parameter."""
    schema = {"minimum": field.bounds[0], "maximum": field.bounds[1]} if field.bounds else {}
    if field.type is tuple:
        schema["items"] = {"type": "string", **({"enum": list(field.choices)} if field.choices else {})}
    return json_arg(JSON_TYPES[field.type], field.description, **schema)


def taking(fields):
    """A tool of signature (ctx, **arguments) made one taking `fields`, then
    `database`, each None unless sent: the SDK reads a tool's parameters from its
    signature, and this one is built from the request's definition."""

    def made(function):
        parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
        for name, kind in [*((field.name, field_arg(field)) for field in fields), ("database", Database)]:
            parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind))
        function.__signature__ = inspect.Signature(parameters, return_annotation=dict[str, Any])
        return function

    return made


Records = json_arg("array", "the records to store, all or none (at most 1,000)", items={"type": "object"})
Claim = json_arg("string", "the words to look for")
StoredId = json_arg("integer", "a stored memory's id")
LookIn = json_arg("string", "a text to look in, instead of a memory")
Ids = json_arg("array", "memory ids (knowledge.id)", items={"type": "integer"})
ExternalIds = json_arg("array", "the _ids records were remembered with", items={"type": ["string", "integer"]})
MemoryId = json_arg("integer", "the memory's id")


def _actor(ctx):
    """The actor Datasette authenticated for this MCP request (None over stdio)."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    actor = scope.get("actor") if isinstance(scope, dict) else None
    return actor if isinstance(actor, dict) else None


def _sent(ctx, **given):
    """The tool call's arguments as sent, when the SDK keeps them: how an argument
    the tool does not take, or a null, is seen at all (the SDK would drop the one
    and default the other); else those `given` that are not None."""
    params = getattr(ctx, "_input_params", None)
    arguments = getattr(params, "arguments", None)
    return arguments if isinstance(arguments, dict) else {n: v for n, v in given.items() if v is not None}


def _failure(known):
    body = tools.error_body(str(known), known.status)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body))], structured_content=body, is_error=True
    )


class JsonPairs(list):
    """A JSON object read as its (key, value) pairs, a key given twice kept."""

    def last(self, key):
        return next((value for name, value in reversed(self) if name == key), None)


def as_json(value, ascii=True):
    """`value` (its objects read as JsonPairs) as JSON text again, every key kept."""
    if isinstance(value, JsonPairs):
        return "{" + ",".join(f"{as_json(key, ascii)}:{as_json(item, ascii)}" for key, item in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(as_json(item, ascii) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii)


async def _arguments_as_sent(ctx):
    """The call's `arguments` as its request's body gave them (HTTP's Starlette
    request, read once already, and stdio's line each keep it), as UTF-8 JSON with
    every key it gave: the SDK's parser keeps a repeated key's last value and drops
    the other. None when the body is not there to read again, or reads only as the
    SDK reads it (a number past Python's digit limit)."""
    body = getattr(ctx.request_context.request, "body", None)
    if body is None:
        return None
    try:
        params = json.loads(await body(), object_pairs_hook=JsonPairs).last("params")
        arguments = params.last("arguments") if isinstance(params, JsonPairs) else None
    except (ValueError, RecursionError, RuntimeError):  # RuntimeError: a body not kept, its stream consumed
        return None
    if not isinstance(arguments, JsonPairs):
        return None
    try:
        return as_json(arguments, ascii=False).encode("utf-8", "surrogatepass")
    except RecursionError:
        return None


async def _read(ctx, tool, sent):
    """The arguments held to the rules of an HTTP route's JSON body (tools.read_json),
    as the JSON they arrived as: NaN, Infinity, a number past Python's digit limit,
    a lone surrogate, which the SDK's own parser may let through, and a key given
    twice, which it drops, are refused."""
    what = f"the {tool} call"
    as_sent = await _arguments_as_sent(ctx)
    if as_sent is not None:
        tools.read_json(as_sent, what)
        return
    try:
        data = json.dumps(sent, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except ValueError:  # an integer past Python's digit limit
        raise tools.ApiError(f"{what} is not valid JSON: {for_plugin.too_many_digits()}") from None
    except RecursionError:
        raise tools.ApiError(f"{what} is nested too deeply") from None
    tools.read_json(data, what)


def register(datasette, mcp, actor=None):
    """Add the brain's tools to `mcp` (an MCPServer). Each call acts as the
    request's actor, or as `actor` when given (stdio, where there is no request)."""

    async def call(ctx, tool, sent, takes, operation, argument, writes=False):
        """Run one of tools.py's operations as its route would, for this caller:
        `argument` is the part of `sent` that is the route's body, `database` its
        URL's. As the route, the caller's permissions come before the body's checks."""
        opened = None  # the brain, once open: its damage a replica mends otherwise
        try:
            caller, database = actor if actor is not None else _actor(ctx), sent.get("database")
            db = opened = await tools.open_brain(datasette, caller, database)
            # on a replica served over HTTP, the primary's route takes the write with the caller's credentials
            forward = writes and actor is None and replica.is_replica(db)
            if writes and not forward:
                db = await tools.writable_brain(datasette, caller, database, db)
            unknown = sorted(set(sent) - set(takes) - {"database"})
            if unknown:
                raise tools.ApiError(
                    f"unknown argument: {', '.join(unknown)}; {tool} takes {', '.join(takes)}, database"
                )
            await _read(ctx, tool, sent)
            if forward:
                return await replica.write_tool(datasette, ctx.request_context.request, db, ROUTES[tool], argument)
            return await operation(datasette, caller, database, argument, db=db)
        except Exception as ex:
            known = tools.as_api_error(ex, opened)
            if known is None:
                raise
            return _failure(known)

    def body(sent):
        """The arguments but `database`: the JSON body the HTTP route reads."""
        return {n: v for n, v in sent.items() if n != "database"}

    @mcp.tool(annotations=READS)
    @taking(brain_sql.QUERY_FIELDS)
    async def brain_recall(ctx: Context, **arguments: Any) -> dict[str, Any]:
        """Recall the memories that answer `q`, best first, each with its provenance
        (source file and lines, which search found it and how well) and its
        relevance. `scope` reads a path and its parents (/acme/support reads /acme
        and /, never /acme/sales); dates in `q` ("last week") are read too, and the
        answer's `query` says what was searched. An empty answer has a `reason`."""
        sent = _sent(ctx, **arguments)
        # every field goes to the QueryDoc, which refuses one it does not know with a suggestion
        return await call(ctx, "brain_recall", sent, body(sent), tools.recall, body(sent))

    @mcp.tool(annotations=WRITES)
    async def brain_remember(
        ctx: Context,
        records: Records = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """Store records as memories, all or none. A record: `text` (required),
        `title`, `_id` (your id for it: remembering the same `_id` again updates it),
        `scope`, `class` (memory, reference or policy), `source`, `tags`,
        `observed_at`, `valid_from` / `valid_to` (a later `valid_from` under the same `_id` keeps
        the earlier version as history), `supersedes` (the `_id` this one replaces), `expires_at`,
        `confidence`, `entities`, `relations`, `metadata`."""
        sent = _sent(ctx, records=records, database=database)
        return await call(ctx, "brain_remember", sent, ["records"], tools.remember, sent.get("records"), writes=True)

    @mcp.tool(annotations=READS)
    async def brain_verify(
        ctx: Context,
        claim: Claim = None,
        id: StoredId = None,
        text: LookIn = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """Whether `claim` is stated, word for word (case and spacing aside), in a
        stored memory (`id`) or in `text`, with where it matches."""
        sent = _sent(ctx, claim=claim, id=id, text=text, database=database)
        return await call(ctx, "brain_verify", sent, ["claim", "id", "text"], tools.verify, body(sent))

    @mcp.tool(annotations=REMOVES)
    async def brain_forget(
        ctx: Context,
        ids: Ids = None,
        external_ids: ExternalIds = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """Remove memories by their ids or by the `_id`s they were remembered with,
        together with the rest of their note or record and the edges only they
        stated; says what was removed and what was not found."""
        sent = _sent(ctx, ids=ids, external_ids=external_ids, database=database)
        return await call(ctx, "brain_forget", sent, ["ids", "external_ids"], tools.forget, body(sent), writes=True)

    @mcp.tool(annotations=READS)
    async def brain_memory(
        ctx: Context,
        id: MemoryId = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """One memory in full: its text and provenance (source, lines, heading,
        scope, class, dates), the other sections of its document, and the entities
        and edges its text states."""
        sent = _sent(ctx, id=id, database=database)
        return await call(ctx, "brain_memory", sent, ["id"], tools.memory, sent.get("id"))

    @mcp.tool(annotations=READS)
    @taking(brain_sql.LISTING_FIELDS)
    async def brain_list(ctx: Context, **arguments: Any) -> dict[str, Any]:
        """List what was stored, newest first (by when it was observed), a page at a
        time: each memory with its id, title, text, class, scope, source, dates and
        validity; `more` says whether another page follows. The filters are
        brain_recall's: `scope` reads a path and its parents, never a sibling."""
        sent = _sent(ctx, **arguments)
        takes = [field.name for field in brain_sql.LISTING_FIELDS]
        return await call(ctx, "brain_list", sent, takes, tools.memories, body(sent))

    _unknown_prompts_refused(mcp)


def _unknown_prompts_refused(mcp):
    """prompts/get of a name `mcp` does not hold is invalid params (-32602), told in
    one line as resources/read of an unknown URI is: the SDK answers it with code 0
    and logs a traceback, once a request."""
    get_prompt = mcp.get_prompt
    if getattr(get_prompt, "brain_checked", False):
        return

    async def checked(name, arguments=None, context=None):
        if name not in {prompt.name for prompt in await mcp.list_prompts()}:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt: {name}")
        return await get_prompt(name, arguments, context)

    checked.brain_checked = True  # type: ignore[attr-defined]
    mcp.get_prompt = checked


# datasette-mcp's get_database_schema: every statement in sqlite_schema, in this order
SCHEMA_SQL = """
select type, name, tbl_name, sql from sqlite_schema where sql is not null
order by case type when 'table' then 0 when 'index' then 1 when 'view' then 2 when 'trigger' then 3 else 4 end, name
"""
# the names a statement may give a table: bare, or quoted in any of SQLite's four ways
NAMES = re.compile(
    r"\"((?:[^\"]|\"\")*)\"|\[([^\]]*)\]|`((?:[^`]|``)*)`|'((?:[^']|'')*)'|([A-Za-z0-9_$\x80-\U0010ffff]+)"
)


def named_in(sql):
    """Every word and quoted name in `sql`, lower-cased (SQLite's names ignore case)."""
    return {next(part for part in match.groups() if part is not None).lower() for match in NAMES.finditer(sql)}


async def readable_schema(datasette, actor, database):
    """The statements of `database`'s schema that `actor` may read, as datasette-mcp
    writes them: those that name (as the table they belong to, or anywhere in their SQL)
    only tables and views the actor may view, as the database's page lists them."""
    rows = (await datasette.get_database(database).execute(SCHEMA_SQL)).rows
    objects = {row["name"].lower(): row["name"] for row in rows if row["type"] in ("table", "view")}
    verdicts: dict[str, bool] = {}

    async def readable(name):
        if name not in verdicts:
            permissions = [("view-table", (database, objects[name])), ("view-database", database), "view-instance"]
            verdicts[name] = (await datasette.check_visibility(actor, permissions=permissions))[0]
        return verdicts[name]

    statements = []
    for row in rows:
        named = sorted(objects.keys() & (named_in(row["sql"]) | {row["tbl_name"].lower()}))
        if all([await readable(name) for name in named]):
            statement = row["sql"].rstrip()
            statements.append(statement if statement.endswith(";") else statement + ";")
    return "\n".join(statements)


def replace_schema_tool(datasette, mcp):
    """datasette-mcp's get_database_schema, made to show whoever calls it only what
    Datasette's own pages show them: it wrote out every statement of the schema,
    the tables the caller may not read (their names, columns, triggers) among them."""
    from datasette_mcp import DatabaseSchema  # there: this runs from datasette-mcp's own hook
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        mcp.remove_tool("get_database_schema")
    except ToolError:  # a datasette-mcp without it
        return

    @mcp.tool(annotations=READS)
    async def get_database_schema(database: str, ctx: Context) -> DatabaseSchema:
        """Return the SQL schema of a database: the tables and views you may read."""
        caller = _actor(ctx)
        if (
            database == "_internal"
            or database not in datasette.databases
            or not (await datasette.permission_allowed(caller, "view-database", database, default=True))
        ):
            raise ToolError(f"Database {database!r} does not exist or is not available.")
        return DatabaseSchema(database=database, schema=await readable_schema(datasette, caller, database))
