"""The agent layer: the loop that runs model calls and tools, and tools from functions.

The engine's run (``nexus.engine``) stands on it: it hands the loop its context, config and steering
queues, and maps its events. Public names::

    agent_loop, agent_loop_continue        the loop as an async iterator of AgentEvents
    AgentLoopConfig, AgentContext          what a run needs
    AgentTool, AgentToolResult, tool       tools (tool() builds one from a typed function)
    LoopMessage, CustomMessage             conversation messages (custom ones never reach the model by default)
    *Event, AgentEvent                     the events (tagged union on ``type``)
    BeforeToolCallContext/Result, AfterToolCallContext   tool hooks
    AgentStateError, ToolDefinitionError, ToolArgumentsError

Importing this package imports none of these modules: each name is imported on first use
(``nexus.engine`` imports the loop and its events, not ``tool()``);
``tool()`` loads pydantic when first used and the default stream function is resolved on the
first run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute

if TYPE_CHECKING:
    from nexus.agent.config import (
        AfterToolCallContext,
        AgentContext,
        AgentLoopConfig,
        AgentStateError,
        BeforeToolCallContext,
        BeforeToolCallResult,
    )
    from nexus.agent.events import (
        AgentEndEvent,
        AgentEndReason,
        AgentEvent,
        AgentStartEvent,
        MessageEndEvent,
        MessageStartEvent,
        MessageUpdateEvent,
        ToolExecutionEndEvent,
        ToolExecutionStartEvent,
        ToolExecutionUpdateEvent,
        TurnEndEvent,
        TurnStartEvent,
    )
    from nexus.agent.loop import agent_loop, agent_loop_continue
    from nexus.agent.messages import CustomMessage, LlmView, LoopMessage, default_convert_to_llm
    from nexus.agent.output_limits import (
        MAX_BYTES,
        MAX_LINE_CHARS,
        MAX_LINES,
        Truncation,
        cap_line,
        format_size,
        truncate_head,
        truncate_tail,
    )
    from nexus.agent.steering import SteeringQueue, SteerMode, SteerReceipt
    from nexus.agent.tool_fn import ToolArgumentsError, ToolDefinitionError, tool
    from nexus.agent.tool_types import AgentTool, AgentToolResult, ToolExecuteFn, ToolUpdateFn

_LAZY: dict[str, str] = {
    "AfterToolCallContext": ".config",
    "AgentContext": ".config",
    "AgentLoopConfig": ".config",
    "AgentStateError": ".config",
    "BeforeToolCallContext": ".config",
    "BeforeToolCallResult": ".config",
    "AgentEndEvent": ".events",
    "AgentEndReason": ".events",
    "AgentEvent": ".events",
    "AgentStartEvent": ".events",
    "MessageEndEvent": ".events",
    "MessageStartEvent": ".events",
    "MessageUpdateEvent": ".events",
    "ToolExecutionEndEvent": ".events",
    "ToolExecutionStartEvent": ".events",
    "ToolExecutionUpdateEvent": ".events",
    "TurnEndEvent": ".events",
    "TurnStartEvent": ".events",
    "agent_loop": ".loop",
    "agent_loop_continue": ".loop",
    "CustomMessage": ".messages",
    "LoopMessage": ".messages",
    "LlmView": ".messages",
    "default_convert_to_llm": ".messages",
    "ToolArgumentsError": ".tool_fn",
    "ToolDefinitionError": ".tool_fn",
    "tool": ".tool_fn",
    "AgentTool": ".tool_types",
    "AgentToolResult": ".tool_types",
    "ToolExecuteFn": ".tool_types",
    "ToolUpdateFn": ".tool_types",
    "MAX_BYTES": ".output_limits",
    "MAX_LINES": ".output_limits",
    "MAX_LINE_CHARS": ".output_limits",
    "Truncation": ".output_limits",
    "cap_line": ".output_limits",
    "format_size": ".output_limits",
    "truncate_head": ".output_limits",
    "truncate_tail": ".output_limits",
    "SteerMode": ".steering",
    "SteerReceipt": ".steering",
    "SteeringQueue": ".steering",
}

__all__ = [
    "MAX_BYTES",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "AfterToolCallContext",
    "AgentContext",
    "AgentEndEvent",
    "AgentEndReason",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentStartEvent",
    "AgentStateError",
    "AgentTool",
    "AgentToolResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "CustomMessage",
    "LlmView",
    "LoopMessage",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "SteerMode",
    "SteerReceipt",
    "SteeringQueue",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "ToolExecuteFn",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolUpdateFn",
    "Truncation",
    "TurnEndEvent",
    "TurnStartEvent",
    "agent_loop",
    "agent_loop_continue",
    "cap_line",
    "default_convert_to_llm",
    "format_size",
    "tool",
    "truncate_head",
    "truncate_tail",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    return lazy_attribute(__name__, _LAZY, globals(), name)
