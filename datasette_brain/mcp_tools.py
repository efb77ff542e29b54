"""The brain's MCP tools: brain_recall, brain_remember, brain_verify, brain_forget,
brain_memory and brain_list. datasette-mcp serves them at /-/mcp with Datasette's
actor on every call (its register_mcp_tools hook); `sqlite-utils brain mcp DB` serves them
over stdio for an agent without a server. Each is a door to the same function in
tools.py as its HTTP route: the same permissions, the same checks, the same JSON.

The arguments reach tools.py as the JSON that arrived: each parameter is declared
as any JSON value (its schema still says the type the route expects), so the MCP
SDK never turns `true` into 1 or "2" into 2 where the route would refuse them,
and an error is the route's own JSON, as structured content.
"""

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

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
Domain = json_arg("string", "only this domain")
Sources = json_arg("array", "only these sources", items={"type": "string"})
Question = json_arg("string", "the question or words to recall memories for")
HowMany = json_arg("integer", "how many hits, 1 to 100 (default 10)")
ScopePath = json_arg("string", "a scope path: it and its parents are read, never a sibling")
Classes = json_arg("array", "only these classes: memory, reference, policy", items={"type": "string"})
Since = json_arg("string", "observed at or after: an ISO time, or relative such as -30d")
Until = json_arg("string", "observed before: an ISO time, or relative such as -1w")
Now = json_arg("string", "a fixed evaluation time (ISO): same inputs and now, same answer")
AsOf = json_arg("string", "what was true then: memories valid at this time and not yet superseded (ISO, or relative "
                "such as -30d); default now")
IncludeDecayed = json_arg("boolean", "include expired and archived memories")
MinRelevance = json_arg("integer", "the lowest relevance tier, 0 (archived) to 3 (pinned); default 1")
GraphLeg = json_arg("boolean", "false leaves the graph walk out")
WithProvenance = json_arg("boolean", "false leaves each hit's provenance out")
Expansion = json_arg("boolean", "false never expands the query")
Diversify = json_arg("boolean", "diversify the hits")
MmrLambda = json_arg("number", "MMR's balance of relevance and diversity, 0 to 1")
MaxTokens = json_arg("integer", "pack hits, in rank order, into this many tokens")
Cutoff = json_arg("boolean", "false returns all k hits, also those with no evidence for the query")
Records = json_arg("array", "the records to store, all or none", items={"type": "object"})
Claim = json_arg("string", "the words to look for")
StoredId = json_arg("integer", "a stored memory's id")
LookIn = json_arg("string", "a text to look in, instead of a memory")
Ids = json_arg("array", "memory ids (knowledge.id)", items={"type": "integer"})
ExternalIds = json_arg("array", "the _ids records were remembered with", items={"type": ["string", "integer"]})
MemoryId = json_arg("integer", "the memory's id")
ListedSince = json_arg("string", "observed at or after: an ISO time, or relative such as -7d")
ListedUntil = json_arg("string", "observed before: an ISO time, or relative such as -1d")
Page = json_arg("integer", "the page, from 1 (default 1)")
PageSize = json_arg("integer", "memories a page, 1 to 1000 (default 20)")


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
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body, is_error=True)


def _read(tool, sent):
    """The arguments held to the rules of an HTTP route's JSON body (tools.read_json),
    as the JSON they arrived as: NaN, Infinity, a number past Python's digit limit
    and a lone surrogate, which the SDK's own parser may let through, are refused."""
    what = f"the {tool} call"
    try:
        data = json.dumps(sent, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except ValueError as ex:  # an integer past Python's digit limit
        raise tools.ApiError(f"{what} is not valid JSON: {ex}") from None
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
        try:
            caller, database = actor if actor is not None else _actor(ctx), sent.get("database")
            db = await tools.open_brain(datasette, caller, database)
            # on a replica served over HTTP, the primary's route takes the write with the caller's credentials
            forward = writes and actor is None and replica.is_replica(db)
            if writes and not forward:
                db = await tools.writable_brain(datasette, caller, database, db)
            unknown = sorted(set(sent) - set(takes) - {"database"})
            if unknown:
                raise tools.ApiError(f"unknown argument: {', '.join(unknown)}; {tool} takes {', '.join(takes)}, database")
            _read(tool, sent)
            if forward:
                return await replica.write_tool(datasette, ctx.request_context.request, db, ROUTES[tool], argument)
            return await operation(datasette, caller, database, argument, db=db)
        except Exception as ex:
            known = tools.as_api_error(ex)
            if known is None:
                raise
            return _failure(known)

    def body(sent):
        """The arguments but `database`: the JSON body the HTTP route reads."""
        return {n: v for n, v in sent.items() if n != "database"}

    @mcp.tool(annotations=READS)
    async def brain_recall(
        ctx: Context,
        q: Question = None,
        database: Database = None,
        k: HowMany = None,
        scope: ScopePath = None,
        classes: Classes = None,
        sources: Sources = None,
        domain: Domain = None,
        since: Since = None,
        until: Until = None,
        now: Now = None,
        as_of: AsOf = None,
        include_decayed: IncludeDecayed = None,
        min_relevance: MinRelevance = None,
        graph: GraphLeg = None,
        provenance: WithProvenance = None,
        prf: Expansion = None,
        mmr: Diversify = None,
        mmr_lambda: MmrLambda = None,
        max_tokens: MaxTokens = None,
        cutoff: Cutoff = None,
    ) -> dict[str, Any]:
        """Recall the memories that answer `q`, best first, each with its provenance
        (source file and lines, which search found it and how well) and its
        relevance. `scope` reads a path and its parents (/acme/support reads /acme
        and /, never /acme/sales); dates in `q` ("last week") are read too, and the
        answer's `query` says what was searched. An empty answer has a `reason`."""
        sent = _sent(ctx, database=database, q=q, k=k, scope=scope, classes=classes, sources=sources, domain=domain,
                     since=since, until=until, now=now, as_of=as_of, include_decayed=include_decayed,
                     min_relevance=min_relevance, graph=graph, provenance=provenance, prf=prf, mmr=mmr,
                     mmr_lambda=mmr_lambda, max_tokens=max_tokens, cutoff=cutoff)  # fmt: skip
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
    async def brain_list(
        ctx: Context,
        scope: ScopePath = None,
        classes: Classes = None,
        sources: Sources = None,
        domain: Domain = None,
        since: ListedSince = None,
        until: ListedUntil = None,
        now: Now = None,
        page: Page = None,
        size: PageSize = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """List what was stored, newest first (by when it was observed), a page at a
        time: each memory with its id, title, text, class, scope, source, dates and
        validity; `more` says whether another page follows. The filters are
        brain_recall's: `scope` reads a path and its parents, never a sibling."""
        sent = _sent(ctx, scope=scope, classes=classes, sources=sources, domain=domain, since=since, until=until,
                     now=now, page=page, size=size, database=database)  # fmt: skip
        takes = ["scope", "classes", "sources", "domain", "since", "until", "now", "page", "size"]
        return await call(ctx, "brain_list", sent, takes, tools.memories, body(sent))
