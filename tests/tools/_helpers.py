"""Helpers for the coding-tool tests: run a tool like the agent loop does, read its text."""

from __future__ import annotations

from typing import Any

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.llm.abort import AbortSignal
from nexus.llm.types import TextContent


async def call(
    tool: AgentTool, signal: AbortSignal | None = None, updates: list[AgentToolResult] | None = None, **args: Any
) -> AgentToolResult:
    """Run a tool the way the agent loop does (validate if present, then execute)."""
    if tool.validate is not None:
        args = tool.validate(args)
    sink: list[AgentToolResult] = [] if updates is None else updates
    return await tool.execute("call-1", args, signal or AbortSignal(), sink.append)


def text_of(result: AgentToolResult) -> str:
    """All text blocks of a result, joined."""
    return "".join(b.text for b in result.content if isinstance(b, TextContent))
