"""MCP servers' tools for agents (the client side of the Model Context Protocol; docs/mcp.md).

Servers are configured in ``[mcp.servers.<name>]`` (a command started over stdio, or a URL over
streamable HTTP / SSE); their tools reach agents as ``AgentTool``s named ``<name>__<tool>``,
under the same tool policy as every tool. One :class:`McpServers` per process owns one
connection per server, started on first need and shared by every run, restarted with backoff
when it dies. The official ``mcp`` SDK (the ``mcp`` extra) is imported only when a server starts.

The MCP *server* face of Nexus (agents as tools for Claude Desktop, Cursor…) is not here: it
lives with the broker's faces, in ``nexus.server`` and ``nexus mcp serve``.
"""

from __future__ import annotations

from nexus.mcp._backoff import RestartPolicy
from nexus.mcp._connection import McpAborted, McpError, ServerConnection
from nexus.mcp.servers import McpServers

__all__ = ["McpAborted", "McpError", "McpServers", "RestartPolicy", "ServerConnection"]
