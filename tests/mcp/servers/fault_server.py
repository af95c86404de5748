"""An MCP server (the official SDK's MCPServer, formerly FastMCP) whose tools misbehave on request.

Run as ``python fault_server.py [stdio|http PORT|sse PORT]``. ``NEXUS_TEST_MARKS`` names a
directory where the server leaves marks the tests read (a call that was cancelled, its pid).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("fault-server")
MARKS = os.environ.get("NEXUS_TEST_MARKS")


def _mark(name: str, text: str = "") -> None:
    if MARKS:
        (Path(MARKS) / name).write_text(text)


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return f"echo: {text}"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress each second; leaves a mark when cancelled."""
    _mark("slow-started", str(os.getpid()))
    try:
        for step in range(int(seconds)):
            await ctx.report_progress(step + 1, seconds, f"step {step + 1}")
            await asyncio.sleep(1)
        await asyncio.sleep(seconds - int(seconds))
    except asyncio.CancelledError:
        _mark("slow-cancelled", str(os.getpid()))
        raise
    return "done"


@server.tool()
def die() -> str:
    """Exit the whole server in the middle of the call."""
    sys.stderr.write("fault-server: dying on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def garbage() -> str:
    """Write something that is not JSON-RPC to stdout and never answer."""
    os.write(1, b"this is not json\n")  # past the SDK's own stdout: the protocol stream itself
    import time

    time.sleep(3600)
    return "never"


@server.tool()
def big(lines: int) -> str:
    """Return that many lines of text."""
    return "\n".join(f"line {n}" for n in range(1, lines + 1))


@server.tool()
def fail(reason: str) -> str:
    """Raise: the result is an MCP error result (isError)."""
    raise ValueError(reason)


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of HTTP request header ``name`` ("" when absent or not over HTTP)."""
    request = getattr(ctx.request_context, "request", None)
    return "" if request is None else str(request.headers.get(name, ""))


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce that the tool list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"added at run time as {name}")
    await ctx.notify_tools_changed()
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception:
        pass
    return f"added {name}"


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run()
    else:
        server.run("streamable-http" if mode == "http" else "sse", host="127.0.0.1", port=int(sys.argv[2]))
