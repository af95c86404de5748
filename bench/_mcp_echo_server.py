"""The MCP server the MCP bench calls: the official SDK's MCPServer (stdio) with three small tools."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
async def sleep(ms: int) -> str:
    """Wait ``ms`` milliseconds, then answer."""
    await asyncio.sleep(ms / 1000)
    return "slept"


@server.tool()
def pid() -> int:
    """The server's process id (the bench reads its memory)."""
    return os.getpid()


if __name__ == "__main__":
    server.run()
