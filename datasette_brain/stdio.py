"""`sqlite-utils brain mcp DB`: the brain's MCP tools over stdin and stdout, for an
agent without a server. Datasette runs in-process, so the tools are the very ones
/-/mcp serves; apart from the plugin so that loading Datasette's plugins never
imports Datasette's app."""

from datasette.app import Datasette
from mcp.server.mcpserver import MCPServer

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
    await server.run_stdio_async()
