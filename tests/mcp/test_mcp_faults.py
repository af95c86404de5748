"""Servers that hang, die, answer garbage or never start: the run gets a tool error, never a hang.

Real processes: ``servers/raw_server.py`` (bare JSON-RPC, for faults the SDK's server will not make)
and ``servers/fault_server.py`` (the SDK's own MCPServer, for cancellation and progress).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp_helpers import FAULT, RAW, config_with, python_server

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.llm.abort import AbortSignal
from nexus.llm.types import TextContent
from nexus.mcp import McpAborted, McpServers, RestartPolicy

pytestmark = pytest.mark.slow


def _text(result: AgentToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def _call(tools: dict[str, AgentTool], name: str, args: dict[str, object] | None = None) -> AgentToolResult:
    return await tools[name].execute("call", args or {}, AbortSignal(), lambda _: None)


def _tools(servers: McpServers) -> dict[str, AgentTool]:
    return {tool.name: tool for tool in servers.tools()}


class FakeClock:
    """Monotonic seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_server_that_hangs_at_start_is_given_up_on_at_its_start_timeout(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"hang": python_server(RAW, "hang", start_timeout_s=1)}))
    started = time.monotonic()
    problems = await servers.prepare(["hang"])
    assert time.monotonic() - started < 15  # bounded by start_timeout_s plus the process's shutdown
    assert len(problems) == 1
    assert "MCP server hang" in problems[0] and "did not finish starting within 1 s" in problems[0]
    assert "its tools are not offered to this run" in problems[0]
    assert servers.tools() == []


async def test_a_server_that_exits_at_start_is_quoted_and_one_that_is_missing_is_named(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(
        config_with(tmp_path, {"gone": python_server(RAW, "exit"), "missing": {"command": str(tmp_path / "nope")}})
    )
    gone, missing = await servers.prepare(["gone", "missing"])
    assert "could not start: it closed the connection during the handshake" in gone
    assert "its stderr ended: raw-server: cannot open the database" in gone
    assert f"No such file or directory: {tmp_path / 'nope'}" in missing


async def test_a_secret_the_server_prints_on_stderr_is_cut_from_the_error(
    tmp_path: Path, open_servers: Callable[..., McpServers], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_DB_PASSWORD", "correct-horse-battery-staple-42")
    table = python_server(RAW, "exit", env={"RAW_PASSWORD": "${MCP_TEST_DB_PASSWORD}"})
    servers = open_servers(config_with(tmp_path, {"db": table}))
    (problem,) = await servers.prepare(["db"])
    assert "login with password [redacted] refused" in problem
    assert "correct-horse-battery-staple-42" not in problem


async def test_a_secret_across_the_cut_of_a_quoted_line_leaves_no_part_of_it(
    tmp_path: Path, open_servers: Callable[..., McpServers], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quote keeps the first 300 characters of a stderr line, 120 of a garbage line: redacted before the cut."""
    secret = "correct-horse-battery-staple-42"
    monkeypatch.setenv("MCP_TEST_DB_PASSWORD", secret)
    env = {"RAW_PASSWORD": "${MCP_TEST_DB_PASSWORD}"}
    servers = open_servers(
        config_with(
            tmp_path,
            {
                "db": python_server(RAW, "exit", env={**env, "RAW_PAD": "258"}),
                "junk": python_server(RAW, "junk", env={**env, "RAW_PAD": "110"}, start_timeout_s=1),
            },
        )
    )
    exited, junk = await servers.prepare(["db", "junk"])
    assert "its stderr ended: raw-server: xxx" in exited and "line(s) that are not MCP" in junk
    assert secret[:6] not in exited, exited[-200:]
    assert secret[:6] not in junk, junk[-200:]


async def test_a_server_that_answers_garbage_at_start_says_what_it_wrote(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"junk": python_server(RAW, "junk", start_timeout_s=3)}))
    (problem,) = await servers.prepare(["junk"])
    assert "line(s) that are not MCP (last: 'Welcome to raw-server 1.0!')" in problem


async def test_an_unset_variable_is_a_start_error_naming_it(
    tmp_path: Path, open_servers: Callable[..., McpServers], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    servers = open_servers(config_with(tmp_path, {"s": python_server(RAW, "ok", env={"K": "${MCP_TEST_UNSET}"})}))
    (problem,) = await servers.prepare(["s"])
    assert "mcp.servers.s.env.K uses ${MCP_TEST_UNSET} but MCP_TEST_UNSET is not set" in problem


async def test_garbage_instead_of_an_answer_is_a_tool_error_and_the_next_call_gets_a_new_process(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    table = python_server(RAW, "ok", timeout_s=1, env={"NEXUS_TEST_MARKS": str(marks)})
    servers = open_servers(config_with(tmp_path, {"raw": table}))
    assert await servers.prepare(["raw"]) == []
    tools = _tools(servers)
    result = await _call(tools, "raw__garbage")
    assert result.is_error
    assert "did not answer garbage within 1 s and wrote 2 line(s) that are not MCP (last: 'still not json')" in _text(
        result
    )
    assert _text(await _call(tools, "raw__echo")) == "echo"
    assert len((marks / "starts").read_text().splitlines()) == 2


async def test_a_result_that_is_not_mcp_is_a_tool_error_and_the_connection_stays(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"raw": python_server(RAW, "ok")}))
    await servers.prepare(["raw"])
    tools = _tools(servers)
    bad = await _call(tools, "raw__bad")
    assert (
        bad.is_error
        and "answered bad with a result that is not MCP (content: Input should be a valid list)" in _text(bad)
    )
    assert _text(await _call(tools, "raw__echo")) == "echo"
    assert servers.connection("raw").status()["restarts"] == 0


async def test_a_server_that_dies_mid_call_is_a_tool_error_and_is_started_again_on_the_next_call(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"f": python_server(FAULT, start_timeout_s=60)}))
    assert await servers.prepare(["f"]) == []
    tools = _tools(servers)
    first = _text(await _call(tools, "f__pid"))
    died = await _call(tools, "f__die")
    assert died.is_error
    assert "MCP server f closed the connection during the call to die" in _text(died)
    assert "fault-server: dying on purpose" in _text(died)
    assert "it is started again on the next call" in _text(died)
    second = _text(await _call(tools, "f__pid"))
    assert second.isdigit() and second != first


async def test_a_restart_that_hangs_gives_the_run_a_tool_error_within_the_start_timeout(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    table = python_server(RAW, "once", start_timeout_s=1, env={"NEXUS_TEST_MARKS": str(marks)})
    servers = open_servers(config_with(tmp_path, {"raw": table}))
    assert await servers.prepare(["raw"]) == []
    tools = _tools(servers)
    quit_result = await _call(tools, "raw__quit")
    assert "closed the connection during the call to quit" in _text(quit_result)
    assert "raw__echo" in _tools(servers)  # still offered: the server was listed and is being restarted
    hung = await _call(tools, "raw__echo")
    assert hung.is_error and "did not finish starting within 1 s" in _text(hung)


async def test_backoff_then_giving_up_then_one_try_every_cap(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    clock = FakeClock()
    policy = RestartPolicy(base_s=4.0, cap_s=300.0, give_up_after=2)
    table = python_server(RAW, "exit", env={"NEXUS_TEST_MARKS": str(marks)})
    servers = open_servers(config_with(tmp_path, {"x": table}), policy=policy, clock=clock)

    def starts() -> int:
        return len((marks / "starts").read_text().splitlines())

    assert "could not start" in (await servers.prepare(["x"]))[0]  # death 1: the next start is at once
    assert "could not start" in (await servers.prepare(["x"]))[0]  # death 2: 4 s
    assert starts() == 2
    waiting = (await servers.prepare(["x"]))[0]
    assert "MCP server x is not running (last: it closed the connection" in waiting and "again in 4.0 s" in waiting
    assert starts() == 2  # no process was started for that run
    clock.now += 4
    assert "could not start" in (await servers.prepare(["x"]))[0]  # death 3: given up
    gave_up = (await servers.prepare(["x"]))[0]
    assert "MCP server x gave up after 2 restarts" in gave_up and "tries to start it again in 300 s" in gave_up
    assert servers.status()[0]["state"] == "failed"
    clock.now += 300
    await servers.prepare(["x"])
    assert starts() == 4


async def test_abort_cancels_the_call_on_the_server(tmp_path: Path, open_servers: Callable[..., McpServers]) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    table = python_server(FAULT, start_timeout_s=60, env={"NEXUS_TEST_MARKS": str(marks)})
    servers = open_servers(config_with(tmp_path, {"f": table}))
    await servers.prepare(["f"])
    slow = _tools(servers)["f__slow"]
    signal, updates = AbortSignal(), []

    def update(partial: AgentToolResult) -> None:
        updates.append(_text(partial))
        signal.abort("stopped by the user")

    result = await slow.execute("c", {"seconds": 60}, signal, update)
    assert result.is_error and "stopped by the user: the call to slow was cancelled (MCP server f)" in _text(result)
    assert updates[0] == "1/60 step 1"
    for _ in range(100):  # the server marks the cancellation it received
        if (marks / "slow-cancelled").exists():
            break
        await asyncio.sleep(0.1)
    assert (marks / "slow-cancelled").exists()


async def test_abort_while_waiting_for_a_start_returns_at_once(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"hang": python_server(RAW, "hang", start_timeout_s=30)}))
    signal = AbortSignal()
    asyncio.get_running_loop().call_later(0.5, signal.abort, "the run was aborted")
    started = time.monotonic()
    with pytest.raises(McpAborted, match="the run was aborted while waiting for MCP server hang to start"):
        await servers.prepare(["hang"], signal)
    assert time.monotonic() - started < 10


async def test_tool_list_changes_are_followed_old_and_new_protocol(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(
        config_with(tmp_path, {"raw": python_server(RAW, "ok"), "f": python_server(FAULT, start_timeout_s=60)})
    )
    assert await servers.prepare(["raw", "f"]) == []
    tools = _tools(servers)
    assert "raw__grown" not in tools and "f__added" not in tools
    await _call(tools, "raw__grow")  # notifications/tools/list_changed (2025-11-25)
    await _call(tools, "f__grow", {"name": "added"})  # subscriptions/listen (2026-07-28)
    for _ in range(100):
        names = set(_tools(servers))
        if {"raw__grown", "f__added"} <= names:
            break
        await asyncio.sleep(0.1)
    assert {"raw__grown", "f__added"} <= set(_tools(servers))
    assert _text(await _call(_tools(servers), "f__added")) == "I am added"
