"""``@modelcontextprotocol/inspector``'s CLI mode against Nexus: ``nexus mcp serve`` over stdio and ``/mcp`` over HTTP.

A second, independent MCP client (node, the protocol's own reference tooling) next to the SDK's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import npm_server
from test_mcp_face import SRC, TOKEN, _serving, _setup

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

pytestmark = pytest.mark.slow


def _inspect(*args: str, cwd: Path) -> Any:
    inspector = npm_server("mcp-inspector")
    done = subprocess.run(
        # its 15 s connect timeout ran out at load 17 before `nexus mcp serve` had started: 120 s
        [str(inspector), "--cli", "--connect-timeout", "120000", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


def _stdio(home: Path) -> list[str]:
    return ["-e", f"NEXUS_HOME={home}", "-e", f"PYTHONPATH={SRC}", sys.executable, "-m", "nexus.cli", "mcp", "serve"]


def test_inspector_lists_and_calls_the_tools_of_nexus_mcp_serve(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _setup(isolated_env, provider)
        listed = _inspect(*_stdio(isolated_env), "--method", "tools/list", cwd=isolated_env)
        assert {tool["name"] for tool in listed["tools"]} >= {"list_agents", "send_message", "get_history"}
        sent = _inspect(
            *_stdio(isolated_env), "--method", "tools/call", "--tool-name", "send_message",
            "--tool-arg", "agent=coder", "content=hello inspector", "id=insp-1", cwd=isolated_env,
        )  # fmt: skip
        assert sent["isError"] is False
        assert sent["structuredContent"]["status"] == "completed"
        assert sent["structuredContent"]["reply"].endswith("hello inspector")
        history = _inspect(
            *_stdio(isolated_env), "--method", "resources/read", "--uri", "nexus://sessions/agent:coder",
            cwd=isolated_env,
        )  # fmt: skip
        turns = json.loads(history["contents"][0]["text"])["turns"]
        assert turns[-1]["id"] == sent["structuredContent"]["turn_id"]


def test_inspector_reaches_mcp_on_nexus_serve_with_the_token(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _setup(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        with _serving(isolated_env) as url:
            agents = _inspect(
                f"{url}/mcp", "--transport", "http", "--header", f"Authorization: Bearer {TOKEN}",
                "--method", "tools/call", "--tool-name", "list_agents", cwd=isolated_env,
            )  # fmt: skip
            assert [a["id"] for a in agents["structuredContent"]["agents"]] == ["coder"]
            inspector = str(npm_server("mcp-inspector"))
            refused = subprocess.run(
                [inspector, "--cli", f"{url}/mcp", "--transport", "http", "--method", "tools/list"],
                cwd=isolated_env, capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
            assert refused.returncode != 0 and "auth_required" in refused.stderr  # our 401 with WWW-Authenticate
