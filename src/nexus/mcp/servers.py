"""``McpServers``: the MCP servers of one process — one connection each, shared by every run.

A runtime owns one. Nothing is started when it is made, and the MCP SDK is not even imported: a
server starts the first time a run could use its tools (:meth:`McpServers.prepare`, which runs
wait for before their context is assembled), and its tools are then offered to every run the
tool policy lets see them (:meth:`McpServers.tools`, synchronous: it reads the last listing). A
server that cannot start leaves its tools out of the runs that start meanwhile, with a line
saying why (:meth:`McpServers.prepare` returns it); a server that was listed once keeps offering
its tools while it restarts, and their calls answer with tool errors until it is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from nexus.config import NexusConfig
from nexus.llm import AbortSignal
from nexus.mcp._backoff import RestartPolicy
from nexus.mcp._connection import McpAborted, McpError, ServerConnection
from nexus.mcp._launch import ServerLaunch, resolve_launch
from nexus.mcp._needed import servers_for

if TYPE_CHECKING:
    from nexus.agent import AgentTool

log = logging.getLogger("nexus.mcp")


class McpServers:
    """The configured (enabled) MCP servers of one process; see the module docstring.

    ``policy`` and ``clock`` shape the restart backoff (tests make it short).
    """

    def __init__(
        self,
        config: NexusConfig,
        *,
        policy: RestartPolicy | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._config = config
        self._policy = policy
        self._clock = clock
        self._connections: dict[str, ServerConnection] = {}
        self._tools: dict[str, tuple[int, list[AgentTool]]] = {}

    @property
    def names(self) -> list[str]:
        """The enabled servers' names."""
        return list(self._config.mcp.enabled())

    def needed(
        self, session_label: str | None = None, role: str | None = None, agent_tools: Sequence[str] | None = None
    ) -> list[str]:
        """The servers a run could take tools from (see :mod:`nexus.mcp._needed`)."""
        return servers_for(self._config, session_label, role, agent_tools)

    def connection(self, name: str) -> ServerConnection:
        """The connection of server ``name`` (made, not started, on first use); McpError for an unknown name."""
        found = self._connections.get(name)
        if found is not None:
            return found
        server = self._config.mcp.enabled().get(name)
        if server is None:
            known = ", ".join(self.names) or "none"
            raise McpError(f"no enabled MCP server named {name!r} (enabled: {known}); see `nexus mcp list`")
        config = self._config

        def launch() -> ServerLaunch:
            return resolve_launch(name, server, config.home, config.workspace_path)

        found = ServerConnection(
            name,
            launch,
            timeout_s=server.timeout_s,
            start_timeout_s=server.start_timeout_s,
            policy=self._policy,
            clock=self._clock,
        )
        self._connections[name] = found
        return found

    async def prepare(self, names: Sequence[str], signal: AbortSignal | None = None) -> list[str]:
        """Start the servers in ``names`` that are not running, together; one line per server that could not be.

        Servers that ran before and answer with errors now keep their tools offered (their calls
        say what is wrong); the lines are for servers whose tools are not offered at all.
        """
        pending = [self.connection(name) for name in names]
        pending = [c for c in pending if c.state != "ready"]
        if not pending:
            return []
        outcomes = await asyncio.gather(*(c.ensure(signal) for c in pending), return_exceptions=True)
        problems = []
        for connection, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, McpAborted):
                raise outcome
            if isinstance(outcome, BaseException) and not connection.listed:
                problems.append(f"{outcome}; its tools are not offered to this run")
                log.warning("%s", outcome)
        return problems

    def tools(self, names: Sequence[str] | None = None) -> list[AgentTool]:
        """The tools of the listed servers (of ``names`` only, when given), each cut to its ``tools`` globs."""
        from nexus.mcp._tools import server_tools

        out: list[AgentTool] = []
        servers = self._config.mcp.enabled()
        for name in names if names is not None else list(self._connections):
            connection = self._connections.get(name)
            if connection is None or not connection.listed or name not in servers:
                continue
            cached = self._tools.get(name)
            if cached is None or cached[0] != connection.version:
                cached = (connection.version, server_tools(connection, servers[name].tools))
                self._tools[name] = cached
            out.extend(cached[1])
        return out

    async def close(self) -> None:
        """Stop every server this process started (each process is stopped within a few seconds)."""
        connections = list(self._connections.values())
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

    def status(self) -> list[dict[str, object]]:
        """Each enabled server's state (``idle`` if never started in this process)."""
        return [
            self._connections[name].status()
            if name in self._connections
            else {"name": name, "state": "idle", "tools": 0, "last_error": None, "restarts": 0}
            for name in self.names
        ]
