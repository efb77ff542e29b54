"""`sqlite-utils brain mcp DB`: the brain's MCP tools over stdin and stdout, for an
agent without a server. Datasette runs in-process, so the tools are the very ones
/-/mcp serves; apart from the plugin so that loading Datasette's plugins never
imports Datasette's app."""

import json

import anyio
import mcp_types
from datasette.app import Datasette
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from . import mcp_tools
from .tools import file_writable


async def serve(path):
    """Serve the tools for the brain at `path` as its owner: reads and writes are
    allowed, as far as the file's own permissions allow."""
    metadata = {"plugins": {"datasette-brain": {"allow_write": True}}}
    if file_writable(path):
        datasette = Datasette([str(path)], metadata=metadata)
    else:  # read it as it is, as `datasette -i` would: recall works, writes say why not
        datasette = Datasette(immutables=[str(path)], metadata=metadata)
    await datasette.invoke_startup()
    server = MCPServer("datasette-brain", instructions=mcp_tools.INSTRUCTIONS)
    mcp_tools.register(datasette, server, actor={"id": "stdio"})
    # MCPServer.run_stdio_async, but the server reads what `_answer_unread` passes on
    lowlevel = server._lowlevel_server
    async with stdio_server() as (lines, replies):
        passed, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_answer_unread, lines, passed, replies)
            await lowlevel.run(read, replies, lowlevel.create_initialization_options())


async def _answer_unread(lines, passed, replies):
    """Pass the messages read from stdin on to the server; answer a line that is no
    JSON-RPC message with its error, as /-/mcp answers such a body. The SDK's stdio
    transport hands the server such a line as an exception, which it only logs: the
    client would wait for an answer that never comes."""
    async with passed:
        async for item in lines:
            if isinstance(item, Exception):
                await replies.send(SessionMessage(unread(item)))
            else:
                await passed.send(item)


def unread(error):
    """The JSON-RPC error for a line the transport could not read (`error`): -32700
    for no JSON (a lone surrogate escape, which JSON text may not hold in UTF-8,
    text cut short), -32600 for JSON that is no request, notification or response;
    with the line's id where one can be read, else null."""
    found = dict(error.errors()[0]) if isinstance(error, ValidationError) and error.errors() else {}
    sent = found.get("input")
    if found.get("type") == "json_invalid":
        code, message = mcp_types.PARSE_ERROR, f"Parse error: {found.get('msg', error)}"
        try:  # Python's JSON reader takes a lone surrogate, so the id may still be read
            sent = json.loads(str(sent))
        except (ValueError, RecursionError):
            sent = None
    else:
        code, message = (
            mcp_types.INVALID_REQUEST,
            "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
        )
    request_id = sent.get("id") if isinstance(sent, dict) else None
    if not _an_id(request_id):
        request_id = None
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message))


def _an_id(value):
    """Whether `value` can be answered as a JSON-RPC id: an integer, or text that
    UTF-8 can carry (no lone surrogate)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
