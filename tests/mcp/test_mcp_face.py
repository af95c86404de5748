"""Nexus as an MCP server: ``nexus mcp serve`` (stdio) and ``/mcp`` on ``nexus serve``, driven by the SDK's client.

Real processes: the command under test is started by the official client's stdio transport, and
``nexus serve`` listens on a real port; the model is the loopback fake provider.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from mcp import Client, StdioServerParameters
from nexus.ledger import BrokerStore, Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

SRC = Path(__file__).resolve().parents[2] / "src"
TOKEN = "mcp-face-t0ken-for-tests"

pytestmark = pytest.mark.slow


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NEXUS_TOKEN": TOKEN}


def _setup(home: Path, provider: FakeProviderServer, server: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n\n'
        f"[server]\n{server}\n\n"
        '[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{provider.openai_base_url}"\napi_key = "test"\n\n'
        '[agents.coder]\nsystem_prompt = "You write code."\n',
        encoding="utf-8",
    )


def _stdio_client(home: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "nexus.cli", "mcp", "serve"], env=_env(home), cwd=str(home)
    )
    return Client(stdio_client(params, errlog=open(os.devnull, "w")), cache=None)


@contextmanager
def _serving(home: Path) -> Iterator[str]:
    """``nexus serve --port 0``; yields its URL once server.json announces it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "serve", "--port", "0"],
        env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        announced = home / "server.json"
        deadline = time.monotonic() + 60
        while not announced.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "nexus serve did not announce itself"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{json.loads(announced.read_text())['port']}"
    finally:
        process.terminate()
        process.communicate(timeout=60)


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


async def test_stdio_face_lists_agents_answers_with_progress_and_keeps_the_history(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo, chunk_chars=3, chunk_delay=0.02) as provider:
        _setup(isolated_env, provider)
        async with _stdio_client(isolated_env) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {
                "list_agents", "send_message", "list_sessions", "get_history", "fork_session",
            }  # fmt: skip
            agents = _data(await client.call_tool("list_agents", {}))["agents"]
            assert [(a["id"], a["session_label"]) for a in agents] == [("coder", "agent:coder")]

            progress: list[str] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")

            sent = _data(
                await client.call_tool(
                    "send_message", {"agent": "coder", "content": "write a haiku", "id": "m-1"},
                    progress_callback=on_progress,
                )
            )  # fmt: skip
            assert sent["status"] == "completed" and sent["reply"].endswith("write a haiku")
            assert sent["session"] == "agent:coder" and sent["duplicate"] is False and sent["turn_id"]
            assert len(progress) >= 2 and "".join(progress) == sent["reply"]  # the text, as it streamed

            again = _data(
                await client.call_tool("send_message", {"agent": "coder", "content": "write a haiku", "id": "m-1"})
            )
            assert (
                again["duplicate"] is True and again["turn_id"] == sent["turn_id"] and again["reply"] == sent["reply"]
            )

            history = _data(await client.call_tool("get_history", {"session": "agent:coder"}))
            assert [t["turn_id"] for t in history["turns"]] == [sent["turn_id"]]  # the retry ran nothing
            roles = [m["role"] for m in history["turns"][0]["messages"]]
            assert roles == ["user", "assistant"]

            fork = _data(await client.call_tool("fork_session", {"session": "agent:coder", "label": "haiku-b"}))
            assert fork["label"] == "haiku-b" and fork["head_turn_id"] == sent["turn_id"] and fork["origin"] == "fork"

            turn = await client.read_resource(f"nexus://turns/{sent['turn_id']}")
            assert json.loads(turn.contents[0].text)["id"] == sent["turn_id"]  # type: ignore[union-attr]
            sessions = json.loads((await client.read_resource("nexus://sessions")).contents[0].text)  # type: ignore[union-attr]
            assert {"agent:coder", "haiku-b"} <= {s["label"] for s in sessions["sessions"]}

            with Ledger.open(isolated_env / "agents.db") as ledger:  # another process's run takes a message
                store = BrokerStore(ledger.database)
                held, _ = store.accept(agent_id="coder", session_label="agent:coder", message_id="elsewhere",
                                       sender="user", message={"content": "x"}, mode="followup")  # fmt: skip
                store.claim([held.id])
            agents = _data(await client.call_tool("list_agents", {}))["agents"]
            assert (agents[0]["state"], agents[0]["queue_depth"]) == ("running", 1)  # it said idle


async def test_stdio_face_refuses_bad_input_with_a_message_the_client_can_act_on(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _setup(isolated_env, provider)
        async with _stdio_client(isolated_env) as client:
            unknown = await client.call_tool("send_message", {"agent": "nobody", "content": "hi"})
            assert unknown.is_error and "unknown agent 'nobody'" in unknown.content[0].text  # type: ignore[union-attr]
            blank = await client.call_tool("send_message", {"agent": "coder", "content": "   "})
            assert blank.is_error and "no content" in blank.content[0].text  # type: ignore[union-attr]
            mode = await client.call_tool("send_message", {"agent": "coder", "content": "x", "mode": "sometimes"})
            assert mode.is_error and "sometimes" in mode.content[0].text  # type: ignore[union-attr]
            missing = await client.call_tool("get_history", {"session": "no-such-session"})
            assert missing.is_error and "no-such-session" in missing.content[0].text  # type: ignore[union-attr]
            empty = await client.call_tool("fork_session", {"session": "agent:coder"})
            assert empty.is_error and "nothing to fork" in empty.content[0].text  # type: ignore[union-attr]
            # a stranger's trial: pydantic's own text (with its site's link), a limit of -1 answered as 1, a resource
            # error naming the Python API
            nothing = await client.call_tool("send_message", {"agent": "coder", "content": ""})
            text = nothing.content[0].text  # type: ignore[union-attr]
            assert nothing.is_error and "content: String should have at least 1 character" in text, text
            assert "pydantic" not in text and "validation error" not in text, text
            for tool, args in (("list_sessions", {"limit": -1}), ("get_history", {"session": "main", "limit": 0})):
                refused = await client.call_tool(tool, args)
                assert refused.is_error and "limit must be from 1 to" in refused.content[0].text  # type: ignore[union-attr]
            with pytest.raises(MCPError) as unknown_session:
                await client.read_resource("nexus://sessions/no-such-session")
            message = str(unknown_session.value)
            assert "no session named 'no-such-session'" in message and "ledger.sessions" not in message, message


async def test_stdio_face_beside_a_running_server_queues_for_it_and_reads_the_reply(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _setup(isolated_env, provider)
        with _serving(isolated_env):
            async with _stdio_client(isolated_env) as client:
                sent = _data(await client.call_tool("send_message", {"agent": "coder", "content": "via the server"}))
                assert sent["status"] == "completed" and sent["reply"].endswith("via the server")
                queued = _data(
                    await client.call_tool("send_message", {"agent": "coder", "content": "later", "wait": False})
                )
                assert queued["queue_item_id"] and queued["duplicate"] is False


async def test_mcp_endpoint_of_nexus_serve_takes_the_same_bearer_token(isolated_env: Path) -> None:
    import httpx

    with FakeProviderServer(default=echo, chunk_chars=3, chunk_delay=0.02) as provider:
        _setup(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        with _serving(isolated_env) as url:
            async with httpx.AsyncClient() as plain:
                refused = await plain.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert refused.status_code == 401
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as client,
            ):
                progress: list[str] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append(message or "")

                sent = _data(
                    await client.call_tool(
                        "send_message", {"agent": "coder", "content": "over streamable http"},
                        progress_callback=on_progress,
                    )
                )  # fmt: skip
                assert sent["reply"].endswith("over streamable http") and "".join(progress) == sent["reply"]
                agents = _data(await client.call_tool("list_agents", {}))["agents"]
                assert agents[0]["state"] == "idle"


async def test_mcp_endpoint_is_behind_the_host_and_origin_guard(isolated_env: Path) -> None:
    import httpx

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    accept = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {TOKEN}"}
    with FakeProviderServer(default=echo) as provider:
        _setup(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        with _serving(isolated_env) as url:
            async with httpx.AsyncClient() as http:
                rebound = await http.post(f"{url}/mcp", json=initialize, headers={**accept, "host": "evil.example"})
                foreign = await http.post(
                    f"{url}/mcp", json=initialize, headers={**accept, "origin": "https://evil.example"}
                )
                fine = await http.post(f"{url}/mcp", json=initialize, headers=accept)
    assert rebound.status_code == 403 and "is not a name of this server" in rebound.text
    assert foreign.status_code == 403
    assert fine.status_code == 200 and "mcp-session-id" in fine.headers
