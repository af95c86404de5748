"""MCP tools inside runs: offered under the tool policy, called by the model, recorded in the ledger.

The model is the loopback fake provider (its recorded requests show which tools were offered);
the MCP servers are real processes. ``nexus run`` is run as a real command for what only a fresh
process shows: which servers it starts, whether it imports the MCP SDK, and that it leaves no
server process behind.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from mcp_helpers import FAULT, RAW, config_with, npm_server, python_server

from nexus.config import parse_config
from nexus.engine import AgentSpec, Runtime, run_agent
from nexus.ledger import Ledger
from nexus.llm.types import Context, ToolResultMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import from_context, text, tool_call

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"


def _provider(server: FakeProviderServer) -> dict[str, Any]:
    return {
        "default_model": "fake/fake-model",
        "providers": {"fake": {"api": "openai-completions", "base_url": server.openai_base_url, "api_key": "k"}},
    }


def _offered(server: FakeProviderServer, request: int = 0) -> set[str]:
    body = server.requests[request].body or {}
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def _tool_result_sent(server: FakeProviderServer) -> str:
    body = server.requests[-1].body or {}
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "tool")


async def test_the_model_calls_an_mcp_tool_and_the_ledger_records_the_call(tmp_path: Path) -> None:
    everything = npm_server("mcp-server-everything")
    script = [tool_call("ev__echo", {"message": "from the model"}, id="c1"), text("done")]
    async with FakeProviderServer(*script) as server:
        config = config_with(
            tmp_path,
            {"ev": {"command": str(everything), "args": ["stdio"]}},
            **_provider(server),
            tools={"deny": ["mcp:ev/get-env"]},
        )
        with Ledger.open(tmp_path / "agents.db") as ledger:
            result = await run_agent("echo something", config=config, ledger=ledger)
            assert result.reply == "done"
            assert "ev__echo" in _offered(server) and "read" in _offered(server)
            assert "ev__get-env" not in _offered(server)  # denied by [tools], like any tool
            assert _tool_result_sent(server) == "Echo: from the model"
            (call,) = await ledger.turns.tool_calls(result.turn_id or "")
            assert (call.tool_name, call.arguments) == ("ev__echo", {"message": "from the model"})
            assert call.status == "completed"
            assert call.result is not None and call.result.text == "Echo: from the model"
            assert call.completed_at is not None and call.completed_at >= call.started_at


async def test_an_agent_spec_narrows_mcp_tools_with_mcp_groups(tmp_path: Path) -> None:
    async with FakeProviderServer(text("ok")) as server:
        config = config_with(tmp_path, {"raw": python_server(RAW, "ok")}, **_provider(server))
        with Ledger.open(tmp_path / "agents.db") as ledger:
            runtime = Runtime(config, ledger)
            try:
                spec = AgentSpec(id="narrow", tools=("mcp:raw/echo", "read"))
                await runtime.run(spec, "s1", "hi")
                assert _offered(server) == {"raw__echo", "read"}
            finally:
                await runtime.aclose()


async def test_runs_of_different_sessions_share_one_connection_per_server(tmp_path: Path) -> None:
    def pid_then_answer(context: Context) -> Any:
        last = context.messages[-1]
        return text(f"pid {last.text}") if isinstance(last, ToolResultMessage) else tool_call("f__pid", {})

    async with FakeProviderServer(default=from_context(pid_then_answer)) as server:
        config = config_with(tmp_path, {"f": python_server(FAULT, start_timeout_s=60)}, **_provider(server))
        with Ledger.open(tmp_path / "agents.db") as ledger:
            runtime = Runtime(config, ledger)
            try:
                spec = AgentSpec(id="a")
                results = await asyncio.gather(*(runtime.run(spec, f"session-{n}", "which pid?") for n in range(4)))
            finally:
                await runtime.aclose()
    replies = {result.reply for result in results}
    assert len(replies) == 1 and replies.pop().split()[1].isdigit()  # four runs, one server process


async def test_an_mcp_tool_error_reaches_the_model_as_a_tool_error(tmp_path: Path) -> None:
    script = [tool_call("raw__quit", {}, id="c1"), text("the server died, sorry")]
    async with FakeProviderServer(*script) as server:
        config = config_with(tmp_path, {"raw": python_server(RAW, "ok")}, **_provider(server))
        with Ledger.open(tmp_path / "agents.db") as ledger:
            result = await run_agent("go", config=config, ledger=ledger)
            sent = _tool_result_sent(server)
            assert "MCP server raw closed the connection during the call to quit" in sent
            (call,) = await ledger.turns.tool_calls(result.turn_id or "")
            assert call.status == "failed" and call.result is not None and call.result.is_error


def _nexus_run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nexus.cli", "run", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _write(home: Path, document: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(tomlkit.dumps(document), encoding="utf-8")
    parse_config((home / "nexus.toml").read_text())  # the file the command reads is valid


def _sdk_imported(stderr: str) -> bool:
    """Whether ``-X importtime`` output shows the MCP SDK (``mcp`` or ``mcp_types``) being imported."""
    return any(line.split("|")[-1].strip() in ("mcp", "mcp_types") for line in stderr.splitlines() if "|" in line)


def test_nexus_run_starts_no_server_and_imports_no_sdk_when_its_tools_exclude_mcp(
    tmp_path: Path, isolated_env: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    with FakeProviderServer(text("no tools needed")) as server:
        raw = python_server(RAW, "ok", env={"NEXUS_TEST_MARKS": str(marks)})
        _write(isolated_env, {**_provider(server), "tools": {"allow": ["read"]}, "mcp": {"servers": {"raw": raw}}})
        done = _nexus_run(isolated_env, "hello")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "no tools needed" in done.stdout
        assert not (marks / "starts").exists()
        assert not _sdk_imported(done.stderr)


def test_nexus_run_uses_an_mcp_tool_and_leaves_no_server_process_behind(tmp_path: Path, isolated_env: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = [tool_call("raw__echo", {}, id="c1"), text("the tool said echo")]
    with FakeProviderServer(*script) as server:
        raw = python_server(RAW, "ok", env={"NEXUS_TEST_MARKS": str(marks)})
        _write(isolated_env, {**_provider(server), "mcp": {"servers": {"raw": raw}}})
        done = _nexus_run(isolated_env, "call it")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "the tool said echo" in done.stdout and _sdk_imported(done.stderr)
    (pid,) = (marks / "starts").read_text().split()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the MCP server (pid {pid}) outlived nexus run")
