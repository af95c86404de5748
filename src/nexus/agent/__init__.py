"""The agent layer: the loop that runs model calls and tools, the stateful ``Agent``, and tools from functions.

Public names::

    agent_loop, agent_loop_continue        the loop as an async iterator of AgentEvents
    AgentLoopConfig, AgentContext          what a run needs
    Agent, AgentState, QueueMode           a stateful conversation with steering / follow-ups
    AgentTool, AgentToolResult, tool       tools (tool() builds one from a typed function)
    AgentMessage, CustomMessage            conversation messages (custom ones never reach the model by default)
    *Event, AgentEvent                     the events (tagged union on ``type``)
    BeforeToolCallContext/Result, AfterToolCallContext   tool hooks
    AgentStateError, AgentBusyError, ToolDefinitionError, ToolArgumentsError

Importing this package imports none of these modules: each name is imported on first use
(``nexus.engine`` imports the loop and its events, not the stateful ``Agent`` or ``tool()``);
``tool()`` loads pydantic when first used and the default stream function is resolved on the
first run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute

if TYPE_CHECKING:
    from nexus.agent.agent import Agent, AgentListener, AgentState, QueueMode
    from nexus.agent.config import (
        AfterToolCallContext,
        AgentBusyError,
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
    from nexus.agent.messages import AgentMessage, CustomMessage, LlmView, default_convert_to_llm
    from nexus.agent.tool_fn import ToolArgumentsError, ToolDefinitionError, tool
    from nexus.agent.tool_types import AgentTool, AgentToolResult, ToolExecuteFn, ToolUpdateFn

_LAZY: dict[str, str] = {
    "Agent": ".agent",
    "AgentListener": ".agent",
    "AgentState": ".agent",
    "QueueMode": ".agent",
    "AfterToolCallContext": ".config",
    "AgentBusyError": ".config",
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
    "AgentMessage": ".messages",
    "CustomMessage": ".messages",
    "LlmView": ".messages",
    "default_convert_to_llm": ".messages",
    "ToolArgumentsError": ".tool_fn",
    "ToolDefinitionError": ".tool_fn",
    "tool": ".tool_fn",
    "AgentTool": ".tool_types",
    "AgentToolResult": ".tool_types",
    "ToolExecuteFn": ".tool_types",
    "ToolUpdateFn": ".tool_types",
}

__all__ = [
    "AfterToolCallContext",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEndEvent",
    "AgentEndReason",
    "AgentEvent",
    "AgentListener",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentStartEvent",
    "AgentState",
    "AgentStateError",
    "AgentTool",
    "AgentToolResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "CustomMessage",
    "LlmView",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "QueueMode",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "ToolExecuteFn",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolUpdateFn",
    "TurnEndEvent",
    "TurnStartEvent",
    "agent_loop",
    "agent_loop_continue",
    "default_convert_to_llm",
    "tool",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    return lazy_attribute(__name__, _LAZY, globals(), name)
