"""MCP servers' tools in runs: started before a run's context is assembled, offered under the tool policy.

Context assembly is synchronous, and a server has to be started (a process, a handshake, a tool
listing) before anyone knows its tools. So a run first awaits :func:`prepare_mcp_tools` — which
starts only the servers this run's policy and agent could use, together, each within its
``start_timeout_s``, abortable — and assembly then reads the listings (``McpServers.tools``) like
any other tool list; the ``[tools]`` policy and ``AgentSpec.tools`` filter them by name as they
filter the coding tools. A server that cannot start costs the run its tools, not the run: a
warning says which server and why (``nexus.mcp``'s log), and the run goes on without them.
Nothing here imports the MCP SDK, and nothing is imported at all when the config has no enabled
server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.llm import AbortSignal
    from nexus.mcp import McpServers


def mcp_servers_for(config: NexusConfig) -> McpServers | None:
    """The process's MCP servers (none started yet), or ``None`` when ``[mcp.servers]`` enables none."""
    if not config.mcp.enabled():
        return None
    from nexus.mcp import McpServers

    return McpServers(config)


async def prepare_mcp_tools(
    servers: McpServers | None,
    session_label: str,
    role: str,
    agent_tools: Sequence[str] | None,
    signal: AbortSignal | None,
) -> list[str]:
    """Start the servers a run could use; one line per server whose tools the run will not have."""
    if servers is None:
        return []
    needed = servers.needed(session_label, role, agent_tools)
    return await servers.prepare(needed, signal) if needed else []
