#!/usr/bin/env python3
"""MCP tool calls: what Nexus adds on top of the MCP SDK, concurrency over one connection, memory.

Rows, interleaved round by round in one run (median of per-call latencies, µs):
  in process            the same ``echo`` function as a Nexus ``AgentTool`` in this process (no MCP)
  SDK Client            ``mcp.Client.call_tool`` over stdio to ``_mcp_echo_server.py`` (the SDK's own cost)
  Nexus MCP tool        the ``AgentTool`` Nexus makes for that tool (``McpServers``), over its own
                        connection to another process of the same server
  added by Nexus        Nexus MCP tool p50 - SDK Client p50 (target: < 1 ms)

Concurrency: 100 calls of ``sleep(200 ms)`` started together, from 100 tasks with their own abort
signals (100 runs), over ONE connection, through Nexus and through the SDK directly; the wall
time against one call alone shows whether any call waits behind another (head-of-line blocking).

Memory: RSS of this process after importing the SDK, then per connected server (10 servers
connected through ``McpServers``: this process's RSS growth / 10) and each server process's own RSS.
With ``--everything`` (``@modelcontextprotocol/server-everything`` under ``$NEXUS_MCP_NPM_DIR``) the
latency rows are repeated against that node server's ``echo``.

  .venv/bin/python bench/bench_mcp.py [--calls 300] [--rounds 5] [--everything]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import _machine

from nexus.agent.tool_fn import tool
from nexus.llm.abort import AbortSignal

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "_mcp_echo_server.py"
NPM_DIR = Path(os.environ.get("NEXUS_MCP_NPM_DIR", "/tmp/mcp-check"))

Call = Callable[[], Awaitable[Any]]


def rss_kib(pid: int | str = "self") -> int:
    """Resident memory of a process in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _config(servers: dict[str, dict[str, Any]]) -> Any:
    import tomlkit

    from nexus.config import parse_config

    workspace = Path(os.environ.get("TMPDIR", "/tmp")) / "nexus-bench-mcp-ws"
    return parse_config(tomlkit.dumps({"workspace": str(workspace), "mcp": {"servers": servers}}))


def _sdk_client(server: dict[str, Any]) -> Any:
    """An SDK ``Client`` over stdio to ``server`` (its stderr to /dev/null, as Nexus keeps it off the terminal)."""
    from mcp.client.stdio import stdio_client

    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=server["command"], args=list(server["args"]))
    return Client(stdio_client(params, errlog=open(os.devnull, "w")), cache=None)


def _python_server() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(ECHO_SERVER)], "start_timeout_s": 120}


async def _timed(call: Call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter_ns()
        await call()
        out.append((time.perf_counter_ns() - start) / 1000)
    return out


async def latency_rows(calls: int, rounds: int, server: dict[str, Any], tool_name: str, arg: str) -> list[str]:
    """The three latency rows and the difference, interleaved round by round."""
    from nexus.mcp import McpServers

    def echo(text: str) -> str:
        """Return the text."""
        return text

    local = tool(echo)
    servers = McpServers(_config({"b": server}))
    try:
        async with _sdk_client(server) as client:
            await client.list_tools()
            await servers.prepare(["b"])
            mcp_tool = next(t for t in servers.tools() if t.metadata["mcp_tool"] == tool_name)
            signal = AbortSignal()
            rows: dict[str, Call] = {
                "in process": lambda: local.execute("c", {"text": "hello"}, signal, lambda _: None),
                "SDK Client": lambda: client.call_tool(tool_name, {arg: "hello"}),
                "Nexus MCP tool": lambda: mcp_tool.execute("c", {arg: "hello"}, signal, lambda _: None),
            }
            samples: dict[str, list[float]] = {name: [] for name in rows}
            for call in rows.values():  # warm-up
                await _timed(call, 20)
            for _ in range(rounds):
                for name, call in rows.items():
                    samples[name] += await _timed(call, calls)
    finally:
        await servers.close()
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    lines = [
        f"| {name} | {p50[name]:,.0f} | {statistics.quantiles(values, n=10)[-1]:,.0f} | {len(values)} |"
        for name, values in samples.items()
    ]
    added = p50["Nexus MCP tool"] - p50["SDK Client"]
    lines.append(f"| added by Nexus (p50 Nexus - p50 SDK) | {added:,.0f} | | target < 1,000 |")
    return lines


async def concurrency_rows(server: dict[str, Any]) -> list[str]:
    """100 concurrent sleep(200 ms) calls over one connection, through Nexus and through the SDK."""
    from nexus.mcp import McpServers

    servers = McpServers(_config({"b": server}))
    out = []
    try:
        async with _sdk_client(server) as client:
            await client.list_tools()
            await servers.prepare(["b"])
            sleep = next(t for t in servers.tools() if t.metadata["mcp_tool"] == "sleep")

            def nexus_call() -> Awaitable[Any]:
                return sleep.execute("c", {"ms": 200}, AbortSignal(), lambda _: None)

            def sdk_call() -> Awaitable[Any]:
                return client.call_tool("sleep", {"ms": 200})

            for name, call in (("Nexus MCP tool", nexus_call), ("SDK Client", sdk_call)):
                one = statistics.median([await _wall(call, 1) for _ in range(3)])
                hundred = statistics.median([await _wall(call, 100) for _ in range(3)])
                out.append(f"| {name} | {one:,.0f} | {hundred:,.0f} | {hundred / one:.2f}x |")
    finally:
        await servers.close()
    return out


async def _wall(call: Callable[[], Awaitable[Any]], n: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(call() for _ in range(n)))
    return (time.perf_counter() - start) * 1000


async def memory_rows(count: int) -> list[str]:
    """RSS after importing the SDK; per connected server, in this process and in the server's."""
    before_import = rss_kib()
    from mcp.client.client import Client  # noqa: F401

    import mcp  # noqa: F401
    from nexus.mcp import McpServers

    after_import = rss_kib()
    servers = McpServers(_config({f"s{n}": _python_server() for n in range(count)}))
    try:
        await servers.prepare([f"s{n}" for n in range(count)])
        await asyncio.sleep(0.5)
        connected = rss_kib()
        tools = {t.name: t for t in servers.tools()}
        pids = []
        for n in range(count):
            result = await tools[f"s{n}__pid"].execute("c", {}, AbortSignal(), lambda _: None)
            pids.append(int(result.content[0].text))  # type: ignore[union-attr]
        server_rss = statistics.median(rss_kib(pid) for pid in pids)
    finally:
        await servers.close()
    return [
        f"| importing the mcp SDK (once per process) | {(after_import - before_import) / 1024:,.1f} MiB |",
        f"| per connected server, in the Nexus process ({count} servers) "
        f"| {(connected - after_import) / count:,.0f} KiB |",
        f"| per connected server, the server process itself (median) | {server_rss / 1024:,.1f} MiB |",
    ]


async def main(args: argparse.Namespace) -> None:
    print(_machine.header("MCP tool calls: Nexus over the MCP SDK, one connection, memory"))
    print("\nmemory (RSS):\n| what | RSS |\n|---|---|")
    for line in await memory_rows(args.servers):
        print(line)
    print(f"\nlatency of one tool call, µs ({args.rounds} interleaved rounds of {args.calls} calls):")
    print("| row (python MCPServer echo over stdio) | p50 | p90 | calls |\n|---|---|---|---|")
    for line in await latency_rows(args.calls, args.rounds, _python_server(), "echo", "text"):
        print(line)
    everything = NPM_DIR / "node_modules" / ".bin" / "mcp-server-everything"
    if args.everything and everything.exists():
        print("| row (server-everything echo, node, over stdio) | p50 | p90 | calls |\n|---|---|---|---|")
        node = {"command": str(everything), "args": ["stdio"], "start_timeout_s": 120}
        for line in await latency_rows(args.calls, args.rounds, node, "echo", "message"):
            print(line)
    elif args.everything:
        print(f"(server-everything not installed under {NPM_DIR}: not measured)")
    print("\n100 concurrent calls of sleep(200 ms) over one connection (wall ms, median of 3):")
    print("| through | 1 call | 100 calls | 100 / 1 |\n|---|---|---|---|")
    for line in await concurrency_rows(_python_server()):
        print(line)
    print(_machine.load_line())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per row per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--servers", type=int, default=10, help="servers connected for the memory rows")
    parser.add_argument("--everything", action="store_true", help="also measure server-everything (node)")
    parser.add_argument("--peers", action="store_true", help="accepted like every bench; the baselines run anyway")
    asyncio.run(main(parser.parse_args()))
