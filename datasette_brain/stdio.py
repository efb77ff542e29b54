"""`sqlite-utils brain mcp DB`: the brain's MCP tools over stdin and stdout, for an
agent without a server. Datasette runs in-process, so the tools are the very ones
/-/mcp serves; apart from the plugin so that loading Datasette's plugins never
imports Datasette's app."""

import os
from pathlib import Path

from datasette.app import Datasette
from mcp.server.mcpserver import MCPServer

from . import mcp_tools


def _writable(path):
    """Whether the file, and its folder (WAL's -shm and -wal files go there), can be written."""
    path = Path(path).resolve()
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


async def serve(path):
    """Serve the tools for the brain at `path` as its owner: reads and writes are
    allowed, as far as the file's own permissions allow."""
    metadata = {"plugins": {"datasette-brain": {"allow_write": True}}}
    if _writable(path):
        datasette = Datasette([str(path)], metadata=metadata)
    else:  # read it as it is, as `datasette -i` would: recall works, writes say why not
        datasette = Datasette(immutables=[str(path)], metadata=metadata)
    await datasette.invoke_startup()
    server = MCPServer("datasette-brain", instructions=mcp_tools.INSTRUCTIONS)
    mcp_tools.register(datasette, server, actor={"id": "stdio"})
    await server.run_stdio_async()
