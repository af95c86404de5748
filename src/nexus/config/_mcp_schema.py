"""``[mcp.servers.<name>]`` in ``nexus.toml``: the MCP servers whose tools agents may use.

Strict like the rest of the file. A server is a command Nexus starts (stdio) or a URL it connects
to (streamable HTTP, or SSE for servers that only have that)::

    [mcp.servers.fs]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
    tools = ["read_*", "list_*"]           # offer only these of its tools (default: all)

    [mcp.servers.gh]
    command = "github-mcp-server"
    args = ["stdio"]
    env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }

    [mcp.servers.search]
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }

Secrets go in ``env`` or ``headers`` (``${VAR}``, resolved when the server starts), never in
``command``/``args``: every user of the machine can read a process's arguments (``ps``). A
``${VAR}`` in ``args`` whose name says it holds a credential is refused at load.
"""

from __future__ import annotations

import re
from typing import Literal

from nexus._lazy import LazyPattern
from nexus.config._env import env_references
from nexus.config._record import Record, field_check, record_check, setting
from nexus.config._tool_names import MCP_SERVER_NAME, expand_tool_patterns

McpTransport = Literal["stdio", "http", "sse"]
"""How Nexus talks to a server: a child process's stdin/stdout, streamable HTTP, or the older SSE."""

_CREDENTIAL_NAME = LazyPattern(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)


class McpServerConfig(Record):
    """One MCP server: how to reach it, how long to wait for it, and which of its tools to offer."""

    command: str | None = None
    args: list[str] = setting(default_factory=list)
    env: dict[str, str] = setting(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = setting(default_factory=dict)
    transport: McpTransport | None = None
    enabled: bool = True
    timeout_s: float = setting(default=60.0, gt=0)
    """How long one tool call may take before it is cancelled and the model told so."""
    start_timeout_s: float = setting(default=30.0, gt=0)
    """How long starting the server (process, handshake, tool list) may take."""
    tools: list[str] = setting(default_factory=list)
    """Globs over the server's own tool names; only matching tools are offered (empty: all)."""

    @field_check("tools")
    def _globs(values: list[str]) -> list[str]:
        expand_tool_patterns(values)  # an empty entry is a mistake
        return values

    @record_check
    def _one_way_to_reach_it(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError('give exactly one of command = "..." (a program to start) or url = "https://..."')
        if self.command is not None:
            self._check_stdio()
        else:
            self._check_remote()

    def _check_stdio(self) -> None:
        assert self.command is not None
        if not self.command.strip():
            raise ValueError("command is empty")
        if self.headers:
            raise ValueError("headers are for url servers; pass a started program's settings in env")
        if self.transport not in (None, "stdio"):
            raise ValueError(f'transport = "{self.transport}" needs a url, not a command')
        for value in (self.command, *self.args):
            secret = [name for name in env_references(value) if _CREDENTIAL_NAME.search(name)]
            if secret:
                raise ValueError(
                    f"args use ${{{secret[0]}}}, a credential: every user of the machine can read a process's "
                    f'arguments (ps); pass it in env instead, e.g. env = {{ {secret[0]} = "${{{secret[0]}}}" }}'
                )

    def _check_remote(self) -> None:
        from nexus.config._urls import base_url_problem

        assert self.url is not None
        if self.args or self.env or self.cwd is not None:
            raise ValueError("args, env and cwd are for command servers; a url server takes headers")
        if self.transport == "stdio":
            raise ValueError('transport = "stdio" needs a command, not a url')
        problem = base_url_problem(self.url)
        if problem is not None:
            raise ValueError(problem)

    @property
    def kind(self) -> McpTransport:
        """The transport used: ``transport`` if given, else ``stdio`` for a command and ``http`` for a url."""
        if self.transport is not None:
            return self.transport
        return "stdio" if self.command is not None else "http"


class McpConfig(Record):
    """``[mcp]``: the servers (``[mcp.servers.<name>]``)."""

    servers: dict[str, McpServerConfig] = setting(default_factory=dict)

    @field_check("servers")
    def _names(servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            check_server_name(name)
        return servers

    def enabled(self) -> dict[str, McpServerConfig]:
        """The servers with ``enabled = true``, by name."""
        return {name: server for name, server in self.servers.items() if server.enabled}


def check_server_name(name: str) -> str:
    """``name`` if it can name an MCP server, else ValueError saying what a name may hold."""
    if not re.match(MCP_SERVER_NAME, name):
        raise ValueError(
            f"MCP server name {name!r} is not usable: use 1-32 lower-case letters, digits, '-' or '_' "
            "(no '__', not ending in '_'); its tools are offered as <name>__<tool>"
        )
    return name
