"""MCP servers over HTTP: the SDK's own MCPServer (formerly FastMCP) in a subprocess, streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp_helpers import FAULT, config_with

from nexus.agent.tool_types import AgentToolResult
from nexus.llm.abort import AbortSignal
from nexus.llm.redact import known_secrets
from nexus.llm.types import TextContent
from nexus.mcp import McpServers

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the test server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the test server did not listen within 60 s")


@pytest.fixture
def http_server() -> Iterator[Callable[[str], str]]:
    """``http_server("http" | "sse")`` starts fault_server.py on a free port and returns its URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> str:
        port = _free_port()
        proc = subprocess.Popen([sys.executable, str(FAULT), mode, str(port)], stderr=subprocess.DEVNULL)
        procs.append(proc)
        _wait_listening(port, proc)
        return f"http://127.0.0.1:{port}/{'mcp' if mode == 'http' else 'sse'}"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _text(result: AgentToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_streamable_http_server_lists_calls_and_gets_the_configured_headers(
    tmp_path: Path,
    open_servers: Callable[..., McpServers],
    http_server: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = http_server("http")
    monkeypatch.setenv("MCP_TEST_TOKEN", "tok-0123456789abcdef")
    table = {"url": url, "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"}}
    servers = open_servers(config_with(tmp_path, {"web": table}))
    assert await servers.prepare(["web"]) == []
    tools = {tool.name: tool for tool in servers.tools()}
    signal = AbortSignal()
    echo = await tools["web__echo"].execute("c", {"text": "over http"}, signal, lambda _: None)
    assert _text(echo) == "echo: over http"
    header = await tools["web__header"].execute("c", {"name": "authorization"}, signal, lambda _: None)
    assert _text(header) == "Bearer tok-0123456789abcdef"
    assert "Bearer tok-0123456789abcdef" in known_secrets()  # no error text or log repeats it
    progress: list[str] = []
    done = await tools["web__slow"].execute("c", {"seconds": 2}, signal, lambda p: progress.append(_text(p)))
    assert _text(done) == "done" and progress[:2] == ["1/2 step 1", "2/2 step 2"]


async def test_sse_server_works_too(
    tmp_path: Path, open_servers: Callable[..., McpServers], http_server: Callable[[str], str]
) -> None:
    url = http_server("sse")
    servers = open_servers(config_with(tmp_path, {"old": {"url": url, "transport": "sse"}}))
    assert await servers.prepare(["old"]) == []
    tools = {tool.name: tool for tool in servers.tools()}
    echo = await tools["old__echo"].execute("c", {"text": "over sse"}, AbortSignal(), lambda _: None)
    assert _text(echo) == "echo: over sse"


async def test_an_http_server_that_is_not_there_is_a_start_error_not_a_hang(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    servers = open_servers(config_with(tmp_path, {"web": {"url": url, "start_timeout_s": 5}}))
    (problem,) = await asyncio.wait_for(servers.prepare(["web"]), 30)
    assert f"MCP server web ({url}) could not start" in problem
