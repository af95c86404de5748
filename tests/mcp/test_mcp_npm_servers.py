"""Third-party MCP servers from npm over stdio: ``server-everything`` and ``server-filesystem``.

Real node processes started by the SDK's stdio transport, driven through the ``AgentTool``s agents
get. See mcp_helpers for how they are installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp_helpers import config_with, npm_server

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ImageContent, TextContent
from nexus.mcp import McpServers

pytestmark = pytest.mark.slow


def _text(result: AgentToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def _tools(servers: McpServers, name: str) -> dict[str, AgentTool]:
    assert await servers.prepare([name]) == []
    return {tool.name: tool for tool in servers.tools([name])}


async def test_everything_server_tools_answer_with_text_images_structured_content_and_resources(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    everything = npm_server("mcp-server-everything")
    servers = open_servers(config_with(tmp_path, {"ev": {"command": str(everything), "args": ["stdio"]}}))
    tools = await _tools(servers, "ev")
    assert {"ev__echo", "ev__get-tiny-image", "ev__get-structured-content", "ev__get-sum"} <= set(tools)
    assert tools["ev__echo"].parameters["properties"]["message"]["type"] == "string"
    signal = AbortSignal()

    echo = await tools["ev__echo"].execute("c1", {"message": "hi there"}, signal, lambda _: None)
    assert _text(echo) == "Echo: hi there" and not echo.is_error
    image = await tools["ev__get-tiny-image"].execute("c2", {}, signal, lambda _: None)
    assert any(isinstance(b, ImageContent) and b.mime_type == "image/png" for b in image.content)
    weather = await tools["ev__get-structured-content"].execute("c3", {"location": "Chicago"}, signal, lambda _: None)
    assert set(weather.details["structured_content"]) >= {"temperature", "conditions"}  # type: ignore[index]
    resource = await tools["ev__get-resource-reference"].execute(
        "c4", {"resourceType": "Text", "resourceId": 2}, signal, lambda _: None
    )
    assert "[resource demo://resource/dynamic/text/2 (text/plain)]" in _text(resource)


async def test_a_server_gets_its_env_table_and_none_of_our_secrets(
    tmp_path: Path, open_servers: Callable[..., McpServers], monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = npm_server("mcp-server-everything")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-should-never-reach-a-server-0123456789")
    monkeypatch.setenv("DEMO_SETTING", "from-the-environment")
    table = {"command": str(everything), "args": ["stdio"], "env": {"DEMO": "${DEMO_SETTING}"}}
    servers = open_servers(config_with(tmp_path, {"ev": table}))
    tools = await _tools(servers, "ev")
    env = _text(await tools["ev__get-env"].execute("c", {}, AbortSignal(), lambda _: None))
    assert '"DEMO": "from-the-environment"' in env
    assert "OPENAI_API_KEY" not in env and "should-never-reach" not in env


async def test_progress_reaches_the_run_and_abort_cancels_the_call(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    everything = npm_server("mcp-server-everything")
    servers = open_servers(config_with(tmp_path, {"ev": {"command": str(everything), "args": ["stdio"]}}))
    tools = await _tools(servers, "ev")
    signal, updates = AbortSignal(), []

    def update(partial: AgentToolResult) -> None:
        updates.append(_text(partial))
        signal.abort("the user pressed Ctrl-C")  # abort once the operation is known to be running

    result = await tools["ev__trigger-long-running-operation"].execute(
        "c", {"duration": 30, "steps": 30}, signal, update
    )
    assert updates and updates[0].startswith("1/30")
    assert (
        result.is_error
        and "the user pressed Ctrl-C: the call to trigger-long-running-operation was cancelled" in _text(result)
    )
    again = await tools["ev__echo"].execute("c", {"message": "still here"}, AbortSignal(), lambda _: None)
    assert _text(again) == "Echo: still here"  # the connection survives a cancelled call


async def test_filesystem_server_reads_in_its_directory_and_refuses_outside_as_a_tool_error(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    filesystem = npm_server("mcp-server-filesystem")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("- buy milk\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    table = {"command": str(filesystem), "args": [str(notes)], "tools": ["read_text_file", "list_*"]}
    servers = open_servers(config_with(tmp_path, {"fs": table}))
    tools = await _tools(servers, "fs")
    assert "fs__read_text_file" in tools and "fs__write_file" not in tools  # cut to the tools globs
    signal = AbortSignal()
    read = await tools["fs__read_text_file"].execute("c", {"path": str(notes / "todo.md")}, signal, lambda _: None)
    assert _text(read) == "- buy milk\n" and not read.is_error
    outside = await tools["fs__read_text_file"].execute("c", {"path": str(tmp_path / "secret.txt")}, signal, print)
    assert outside.is_error and "top secret" not in _text(outside) and "denied" in _text(outside).lower()


async def test_one_connection_serves_a_hundred_concurrent_calls(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    everything = npm_server("mcp-server-everything")
    servers = open_servers(config_with(tmp_path, {"ev": {"command": str(everything), "args": ["stdio"]}}))
    tools = await _tools(servers, "ev")
    connection = servers.connection("ev")
    first = connection._client

    async def call(n: int) -> str:
        return _text(await tools["ev__get-sum"].execute(f"c{n}", {"a": n, "b": 1}, AbortSignal(), lambda _: None))

    answers = await asyncio.gather(*(call(n) for n in range(100)))
    assert answers == [f"The sum of {n} and 1 is {n + 1}." for n in range(100)]
    assert connection._client is first and connection.status()["restarts"] == 0
