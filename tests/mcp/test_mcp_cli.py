"""``nexus mcp add|list|rm|tools`` and MCP names in ``nexus agents add --tools``, as real commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import RAW, npm_server

from nexus.config import load_config

SRC = Path(__file__).resolve().parents[2] / "src"

pytestmark = pytest.mark.slow


def _nexus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_add_checks_the_server_writes_the_table_and_list_tools_rm_follow(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text("# my settings\n[agent]\nmax_iterations = 10\n")
    added = _nexus(
        isolated_env, "mcp", "add", "raw", "--command", f"{sys.executable} {RAW} ok", "--tools", "echo", "grow"
    )
    assert added.returncode == 0, added.stderr
    assert "2 tool(s) offered to agents: raw__echo, raw__grow" in added.stdout
    text = (isolated_env / "nexus.toml").read_text()
    assert text.startswith("# my settings\n[agent]\nmax_iterations = 10\n")  # comments and settings kept
    server = load_config().mcp.servers["raw"]
    assert (server.command, server.args, server.tools) == (sys.executable, [str(RAW), "ok"], ["echo", "grow"])

    listed = json.loads(_nexus(isolated_env, "mcp", "list", "--json").stdout)
    assert listed == [
        {
            "name": "raw",
            "enabled": True,
            "transport": "stdio",
            "target": f"{sys.executable} {RAW} ok",
            "tools": ["echo", "grow"],
        }
    ]
    tools = json.loads(_nexus(isolated_env, "mcp", "tools", "raw", "--json").stdout)
    assert [(t["name"], t["tool"]) for t in tools] == [("raw__echo", "echo"), ("raw__grow", "grow")]

    assert _nexus(isolated_env, "mcp", "rm", "raw").returncode == 0
    assert load_config().mcp.servers == {}
    gone = _nexus(isolated_env, "mcp", "rm", "raw")
    assert gone.returncode == 2 and "no MCP server named 'raw'" in gone.stderr


def test_add_refuses_secrets_on_the_command_line_and_bad_tables_writing_nothing(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    cases = [
        (["--env", "GH_TOKEN=ghp_abcdefabcdefabcdefabcdef0123"], "looks like a credential"),
        (["--header", "Authorization: Bearer abcdef0123456789"], "looks like a credential"),
        (["--url", "ftp://example.com"], "is not an http:// or https:// URL"),
    ]
    for extra, complaint in cases:
        command = [] if "--url" in extra else ["--command", "some-server"]
        done = _nexus(isolated_env, "mcp", "add", "bad", *command, *extra, "--no-check")
        assert done.returncode == 2 and complaint in done.stderr, done.stderr
    for argv in ("gh-mcp stdio --personal-access-token ghp_abcdefghijklmnop1234567890",
                 "srv --api-key=sk-abcdefabcdefabcdefabcdef0123"):  # fmt: skip
        in_args = _nexus(isolated_env, "mcp", "add", "bad", "--command", argv, "--no-check")  # it was stored
        assert in_args.returncode == 2 and "looks like a credential" in in_args.stderr, in_args.stderr
        assert "--env VAR" in in_args.stderr and "ghp_" not in in_args.stderr + in_args.stdout
    bad_name = _nexus(isolated_env, "mcp", "add", "Bad", "--command", "x", "--no-check")
    assert bad_name.returncode == 2 and "is not usable" in bad_name.stderr
    assert not (isolated_env / "nexus.toml").exists()
    stored = _nexus(isolated_env, "mcp", "add", "gh", "--command", "gh-mcp stdio", "--env", "GH_TOKEN", "--no-check")
    assert stored.returncode == 0, stored.stderr
    assert load_config().mcp.servers["gh"].env == {"GH_TOKEN": "${GH_TOKEN}"}


def test_add_of_a_server_that_cannot_start_keeps_the_table_and_says_what_to_do(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    done = _nexus(isolated_env, "mcp", "add", "gone", "--command", f"{sys.executable} {RAW} exit")
    assert done.returncode == 1
    assert "raw-server: cannot open the database" in done.stderr
    assert "fix it, then `nexus mcp tools gone`" in done.stderr
    assert "gone" in load_config().mcp.servers


def test_add_without_the_mcp_extra_writes_nothing_and_names_the_extra(isolated_env: Path, tmp_path: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text("# my settings\n")
    blocker = tmp_path / "no-mcp" / "mcp"  # first on the path: `import mcp` fails as in an install without it
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no mcp here', name='mcp')\n")
    env = {**os.environ, "NEXUS_HOME": str(isolated_env), "PYTHONPATH": f"{blocker.parent}{os.pathsep}{SRC}"}
    command = [sys.executable, "-m", "nexus.cli", "mcp", "add", "fs", "--command", f"{sys.executable} {RAW}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "pip install 'nexus-broker[mcp]'" in done.stderr and "nothing was written" in done.stderr
    assert (isolated_env / "nexus.toml").read_text() == "# my settings\n"
    kept = subprocess.run([*command, "--no-check"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert kept.returncode == 0 and "fs" in load_config().mcp.servers, kept.stderr


def test_agents_may_name_configured_servers_tools(isolated_env: Path) -> None:
    everything = npm_server("mcp-server-everything")
    isolated_env.mkdir(parents=True, exist_ok=True)
    assert _nexus(isolated_env, "mcp", "add", "ev", "--command", f"{everything} stdio", "--no-check").returncode == 0
    ok = _nexus(isolated_env, "agents", "add", "helper", "--tools", "read,ev__echo,mcp:ev/get-*")
    assert ok.returncode == 0, ok.stderr
    wrong = _nexus(isolated_env, "agents", "add", "other", "--tools", "read,gh__create_issue")
    assert wrong.returncode == 2 and "names MCP server 'gh', which is not in [mcp.servers]" in wrong.stderr


def test_list_never_prints_a_credential_written_into_args_by_hand(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text(
        '[mcp.servers.gh]\ncommand = "gh-mcp"\nargs = ["stdio", "--token", "ghp_abcdefghijklmnop1234567890"]\n'
    )
    for extra in ([], ["--json"]):
        listed = _nexus(isolated_env, "mcp", "list", *extra)
        assert listed.returncode == 0, listed.stderr
        assert "ghp_abcdef" not in listed.stdout and "gh-mcp stdio --token [redacted]" in listed.stdout, listed.stdout
