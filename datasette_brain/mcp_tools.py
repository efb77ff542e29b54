"""The brain's MCP tools: brain_recall, brain_remember, brain_verify, brain_forget
and brain_memory. datasette-mcp serves them at /-/mcp with Datasette's actor on
every call (its register_mcp_tools hook); `sqlite-utils brain mcp DB` serves them
over stdio for an agent without a server. Each is a door to the same function in
tools.py as its HTTP route: the same permissions, the same JSON.
"""

import json
from typing import Annotated, Any, Optional

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from . import tools

READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
REMOVES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
Database = Annotated[Optional[str], Field(description="the brain database to use; needed only when the server holds several")]

INSTRUCTIONS = (
    "A long-term memory. Call brain_recall with a question before answering from memory; "
    "each hit has its source and why it was found, and an empty answer says why. "
    "Store what should be remembered with brain_remember (a record: text, title, optional _id "
    "to update it later), read one memory in full with brain_memory, check a claim against "
    "a memory with brain_verify, and remove memories with brain_forget."
)


def _actor(ctx):
    """The actor Datasette authenticated for this MCP request (None over stdio)."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    actor = scope.get("actor") if isinstance(scope, dict) else None
    return actor if isinstance(actor, dict) else None


def register(datasette, mcp, actor=None):
    """Add the brain's tools to `mcp` (an MCPServer). Each call acts as the
    request's actor, or as `actor` when given (stdio, where there is no request)."""

    async def call(operation, ctx, *args):
        try:
            return await operation(datasette, actor if actor is not None else _actor(ctx), *args)
        except Exception as ex:
            known = tools.as_api_error(ex)
            if known is None:
                raise
            raise ToolError(json.dumps(tools.error_body(str(known), known.status))) from None

    @mcp.tool(annotations=READS)
    async def brain_recall(
        q: str,
        ctx: Context,
        database: Database = None,
        k: Optional[int] = None,
        scope: Optional[str] = None,
        classes: Optional[list[str]] = None,
        sources: Optional[list[str]] = None,
        domain: Optional[str] = None,
        since: Optional[str] = None,
        until: Optional[str] = None,
        now: Optional[str] = None,
        include_decayed: Optional[bool] = None,
        min_relevance: Optional[int] = None,
        graph: Optional[bool] = None,
        prf: Optional[bool] = None,
        mmr: Optional[bool] = None,
        max_tokens: Optional[int] = None,
        cutoff: Optional[bool] = None,
    ) -> dict[str, Any]:
        """Recall the memories that answer `q`, best first, each with its provenance
        (source file and lines, which search found it and how well). `scope` reads a
        path and its parents (/acme/support reads /acme and /, never /acme/sales);
        `since`/`until` take ISO times or -30d; dates in `q` ("last week") are read
        too. An empty answer has a `reason`."""
        given = dict(q=q, k=k, scope=scope, classes=classes, sources=sources, domain=domain, since=since,
                     until=until, now=now, include_decayed=include_decayed, min_relevance=min_relevance,
                     graph=graph, prf=prf, mmr=mmr, max_tokens=max_tokens, cutoff=cutoff)  # fmt: skip
        return await call(tools.recall, ctx, database, {name: v for name, v in given.items() if v is not None})

    @mcp.tool(annotations=WRITES)
    async def brain_remember(records: list[dict[str, Any]], ctx: Context, database: Database = None) -> dict[str, Any]:
        """Store records as memories, all or none. A record: `text` (required),
        `title`, `_id` (your id for it: remembering the same `_id` again updates it),
        `scope`, `class` (memory, reference or policy), `source`, `tags`,
        `observed_at`, `expires_at`, `confidence`, `entities`, `relations`, `metadata`."""
        return await call(tools.remember, ctx, database, records)

    @mcp.tool(annotations=READS)
    async def brain_verify(
        claim: str,
        ctx: Context,
        id: Optional[int] = None,
        text: Optional[str] = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """Whether `claim` is stated, word for word (case and spacing aside), in a
        stored memory (`id`) or in `text`, with where it matches."""
        body = {"claim": claim, **({"id": id} if id is not None else {}), **({"text": text} if text is not None else {})}
        return await call(tools.verify, ctx, database, body)

    @mcp.tool(annotations=REMOVES)
    async def brain_forget(
        ctx: Context,
        ids: Optional[list[int]] = None,
        external_ids: Optional[list[str]] = None,
        database: Database = None,
    ) -> dict[str, Any]:
        """Remove memories by their ids or by the `_id`s they were remembered with,
        together with the rest of their note or record and the edges only they
        stated; says what was removed."""
        body = {**({"ids": ids} if ids is not None else {}), **({"external_ids": external_ids} if external_ids is not None else {})}
        return await call(tools.forget, ctx, database, body)

    @mcp.tool(annotations=READS)
    async def brain_memory(id: int, ctx: Context, database: Database = None) -> dict[str, Any]:
        """One memory in full: its text and provenance (source, lines, heading,
        scope, class, dates), the other sections of its document, and the entities
        and edges its text states."""
        return await call(tools.memory, ctx, database, id)
