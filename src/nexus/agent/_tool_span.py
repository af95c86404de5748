"""A tool call as a span and as metrics (OpenTelemetry GenAI ``execute_tool``), only while telemetry is on.

The span ``execute_tool {name}`` is current while the tool runs, so what the tool starts — a
message to another agent, a sub-agent's run — hangs under it in the trace. Its arguments and
result go on the span only with ``[telemetry] capture_content = true``, redacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nexus import telemetry
from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.llm import AbortSignal, ToolCall

CallTool = Callable[
    [AgentTool, str, dict[str, Any], AbortSignal, Callable[[AgentToolResult], None]], Awaitable[AgentToolResult]
]
"""``nexus.agent._tool_exec.call_tool``, handed in (the executor imports this module only while telemetry is on)."""


async def observed_call(
    call_tool: CallTool,
    tool: AgentTool,
    call: ToolCall,
    args: dict[str, Any],
    signal: AbortSignal,
    on_update: Callable[[AgentToolResult], None],
) -> AgentToolResult:
    """:func:`call_tool` inside the tool call's span, timed for ``nexus_tool_call_duration_seconds``."""
    span = telemetry.start_span(
        f"execute_tool {tool.name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        },
    )
    capture = span.recording and telemetry.capture_content()
    if capture:
        span.set_attribute("gen_ai.tool.call.arguments", _redacted(json.dumps(args, ensure_ascii=False, default=str)))
    started = time.perf_counter()
    try:
        with telemetry.use_span(span):
            result = await call_tool(tool, call.id, args, signal, on_update)
    except BaseException:  # call_tool answers every failure with a result; this is the task being torn down
        span.fail("aborted")
        span.end()
        raise
    duration = time.perf_counter() - started
    telemetry.metrics().tool_call(tool.name, duration, failed=result.is_error)
    if capture:
        span.set_attribute("gen_ai.tool.call.result", _redacted(_text(result)))
    if result.is_error:
        span.fail("tool_error")
    span.end()
    return result


def _text(result: AgentToolResult) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def _redacted(text: str) -> str:
    from nexus.llm import redact

    return redact(text)
