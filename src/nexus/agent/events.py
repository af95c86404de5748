"""Agent events: what ``agent_loop`` yields and ``Agent.subscribe`` listeners receive.

A tagged union of slotted dataclasses, matched on ``type``. Order for a prompt that leads
to one tool call::

    agent_start, turn_start, message_start/end (user), message_start (assistant),
    message_update x N, message_end (assistant), tool_execution_start,
    tool_execution_update x K, tool_execution_end, message_start/end (tool_result),
    turn_end, turn_start, message_start … message_end (assistant), turn_end, agent_end

A turn is one assistant response plus the results of its tool calls.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.agent.messages import LoopMessage
from nexus.agent.tool_types import AgentToolResult
from nexus.llm import AssistantMessage, AssistantMessageEvent, ToolResultMessage

AgentEndReason: TypeAlias = Literal["stop", "error", "aborted", "max_iterations"]
"""Why a run ended: normally, on a model/loop error, on abort, or at the iteration guard."""


@dataclass(slots=True)
class AgentStartEvent:
    """The run began."""

    type: Literal["agent_start"] = "agent_start"


@dataclass(slots=True)
class AgentEndEvent:
    """The run is over; ``messages`` are the messages it added, ``error`` says why it failed, if it did."""

    messages: list[LoopMessage] = field(default_factory=list)
    reason: AgentEndReason = "stop"
    error: str | None = None
    type: Literal["agent_end"] = "agent_end"


@dataclass(slots=True)
class TurnStartEvent:
    """A turn (one assistant response and its tool results) begins."""

    type: Literal["turn_start"] = "turn_start"


@dataclass(slots=True)
class TurnEndEvent:
    """The turn is complete: the assistant response and the results of its tool calls, in call order."""

    message: AssistantMessage
    tool_results: list[ToolResultMessage] = field(default_factory=list)
    type: Literal["turn_end"] = "turn_end"


@dataclass(slots=True)
class MessageStartEvent:
    """A message begins: a prompt or injected message, a streaming assistant response, or a tool result."""

    message: LoopMessage
    type: Literal["message_start"] = "message_start"


@dataclass(slots=True)
class MessageUpdateEvent:
    """The streaming assistant message changed (assistant messages only).

    ``message`` is the partial message (the same object for the whole stream: copy it to
    keep a snapshot); ``assistant_event`` is the provider stream event that changed it.
    """

    message: AssistantMessage
    assistant_event: AssistantMessageEvent
    type: Literal["message_update"] = "message_update"


@dataclass(slots=True)
class MessageEndEvent:
    """The message is final and has been appended to the conversation."""

    message: LoopMessage
    type: Literal["message_end"] = "message_end"


@dataclass(slots=True)
class ToolExecutionStartEvent:
    """The loop started handling tool call ``tool_call_id`` (emitted for every call, in call order)."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    type: Literal["tool_execution_start"] = "tool_execution_start"


@dataclass(slots=True)
class ToolExecutionUpdateEvent:
    """A running tool reported progress (``partial_result``, e.g. command output so far)."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    partial_result: AgentToolResult
    type: Literal["tool_execution_update"] = "tool_execution_update"


@dataclass(slots=True)
class ToolExecutionEndEvent:
    """The tool call is finished; ``result`` is what the model will see (emitted in call order)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    type: Literal["tool_execution_end"] = "tool_execution_end"


AgentEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
)
"""Every event of an agent run."""
