"""Shared pieces of the MCP tests: where the npm servers are, configs, our own fault servers.

The third-party servers come from npm: ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem`` (and the inspector, for the server face), installed under
``$NEXUS_MCP_NPM_DIR`` (default ``/tmp/mcp-check``) by ``.ci/run``. Without them those tests skip,
unless ``NEXUS_REQUIRE_MCP_SERVERS`` is set (CI): then a missing install fails.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from nexus.config import NexusConfig, parse_config

NPM_DIR = Path(os.environ.get("NEXUS_MCP_NPM_DIR", "/tmp/mcp-check"))
NPM_BIN = NPM_DIR / "node_modules" / ".bin"
SERVERS = Path(__file__).resolve().parent / "servers"
RAW = SERVERS / "raw_server.py"
FAULT = SERVERS / "fault_server.py"


def npm_server(name: str) -> Path:
    """``node_modules/.bin/<name>``; skips (or fails under NEXUS_REQUIRE_MCP_SERVERS) when it is missing."""
    path = NPM_BIN / name
    if path.exists() and shutil.which("node") is not None:
        return path
    if os.environ.get("NEXUS_REQUIRE_MCP_SERVERS"):
        raise RuntimeError(f"NEXUS_REQUIRE_MCP_SERVERS is set but {path} (or node) is missing")
    pytest.skip(f"{name} is not installed under {NPM_DIR} (npm install --prefix {NPM_DIR} ...)")


def python_server(script: Path, *args: str, **settings: Any) -> dict[str, Any]:
    """A ``[mcp.servers.X]`` table that starts one of our Python test servers."""
    return {"command": sys.executable, "args": [str(script), *args], **settings}


def config_with(tmp_path: Path, servers: dict[str, dict[str, Any]], **top: Any) -> NexusConfig:
    """A validated config with these ``[mcp.servers]`` tables and the workspace in ``tmp_path``."""
    document: dict[str, Any] = {"workspace": str(tmp_path / "ws"), **top, "mcp": {"servers": servers}}
    return parse_config(tomlkit.dumps(document))
