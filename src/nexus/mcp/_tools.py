"""An MCP server's tools as ``AgentTool``s named ``<server>__<tool>``.

The agent loop treats them like any tool: it checks the model's arguments against the tool's
input schema, runs calls of one batch in parallel, and the engine records each call in the
ledger (arguments, result, duration, error). Everything that goes wrong on the MCP side — the
server cannot start, dies mid-call, times out, answers garbage, refuses the call — becomes an
error result the model reads (:class:`~nexus.mcp._connection.McpError`), never an exception out
of the loop and never a hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.config import expand_tool_patterns, mcp_tool_name, tool_matches
from nexus.llm import AbortSignal
from nexus.mcp._connection import McpError, ServerConnection
from nexus.mcp._content import to_tool_result

if TYPE_CHECKING:
    from mcp.types import Tool


def server_tools(connection: ServerConnection, offered: Sequence[str] = ()) -> list[AgentTool]:
    """The listed tools of ``connection`` (only those matching the ``offered`` globs, when given)."""
    wanted = expand_tool_patterns(offered) if offered else []
    taken: set[str] = set()
    tools = []
    for tool in connection.tools:  # names are decided over the whole listing: a filter never renames a tool
        name = mcp_tool_name(connection.name, tool.name)
        if name.lower() in taken:  # two tools that differ only in characters providers refuse (or in case)
            name = mcp_tool_name(connection.name, tool.name, distinct=True)
        taken.add(name.lower())
        if not wanted or tool_matches(tool.name, wanted):
            tools.append(_agent_tool(connection, tool, name))
    return tools


def _agent_tool(connection: ServerConnection, tool: Tool, name: str) -> AgentTool:
    description = tool.description or tool.title or f"The {tool.name} tool of MCP server {connection.name}."
    return AgentTool(
        name=name,
        description=description,
        parameters=_parameters(tool.input_schema),
        execute=_executor(connection, tool.name),
        label=tool.title or tool.name,
        metadata={"mcp_server": connection.name, "mcp_tool": tool.name},
    )


def _parameters(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The input schema as providers take it: an object schema, without the ``$schema`` marker."""
    parameters = {key: value for key, value in (schema or {}).items() if key != "$schema"}
    parameters.setdefault("type", "object")
    if parameters["type"] == "object":
        parameters.setdefault("properties", {})
    return parameters


def _executor(connection: ServerConnection, tool: str) -> Any:
    async def execute(
        call_id: str, arguments: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        def progress(value: float, total: float | None, message: str | None) -> None:
            done = f"{value:g}/{total:g}" if total else f"{value:g}"
            on_update(
                AgentToolResult.text(f"{done} {message or ''}".strip(), details={"progress": value, "total": total})
            )

        try:
            result = await connection.call(tool, arguments, signal, progress)
        except McpError as exc:
            return AgentToolResult.text(
                str(exc), is_error=True, details={"mcp_server": connection.name, "mcp_tool": tool}
            )
        return to_tool_result(result, connection.name, tool)

    return execute
