"""Stream events of one assistant response (a tagged union, matched on ``type``).

Every non-terminal event carries ``partial``: the assistant message as it stands, the
same object throughout one stream (consumers that need a snapshot copy it). A stream
ends with exactly one :class:`DoneEvent` or :class:`ErrorEvent`; nothing follows it.
A tool call is announced complete (``toolcall_end``) only once its arguments are whole.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm.types import AssistantMessage, ThinkingContent, ToolCall


@dataclass(slots=True)
class StartEvent:
    """The provider accepted the request; ``partial`` is empty or holds initial usage."""

    partial: AssistantMessage
    type: Literal["start"] = "start"


@dataclass(slots=True)
class TextStartEvent:
    """A text block opened at ``content_index``."""

    content_index: int
    partial: AssistantMessage
    type: Literal["text_start"] = "text_start"


@dataclass(slots=True)
class TextDeltaEvent:
    """More text for the block at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True)
class TextEndEvent:
    """The text block at ``content_index`` is final; ``content`` is its whole text."""

    content_index: int
    content: str
    partial: AssistantMessage
    type: Literal["text_end"] = "text_end"


@dataclass(slots=True)
class ThinkingStartEvent:
    """A thinking block opened at ``content_index``."""

    content_index: int
    partial: AssistantMessage
    type: Literal["thinking_start"] = "thinking_start"


@dataclass(slots=True)
class ThinkingDeltaEvent:
    """More reasoning text for the block at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(slots=True)
class ThinkingEndEvent:
    """The thinking block at ``content_index`` is final."""

    content_index: int
    content: ThinkingContent
    partial: AssistantMessage
    type: Literal["thinking_end"] = "thinking_end"


@dataclass(slots=True)
class ToolCallStartEvent:
    """A tool call opened at ``content_index`` (id and name known, arguments not yet)."""

    content_index: int
    partial: AssistantMessage
    type: Literal["toolcall_start"] = "toolcall_start"


@dataclass(slots=True)
class ToolCallDeltaEvent:
    """A raw JSON chunk of the arguments of the tool call at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["toolcall_delta"] = "toolcall_delta"


@dataclass(slots=True)
class ToolCallEndEvent:
    """The tool call at ``content_index`` is complete, arguments parsed."""

    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    type: Literal["toolcall_end"] = "toolcall_end"


@dataclass(slots=True)
class DoneEvent:
    """The response finished normally; ``message`` is final (reason stop, length or tool_use)."""

    reason: Literal["stop", "length", "tool_use"]
    message: AssistantMessage
    type: Literal["done"] = "done"


@dataclass(slots=True)
class ErrorEvent:
    """The response failed or was aborted; ``error`` is the final message with partial content."""

    reason: Literal["error", "aborted"]
    error: AssistantMessage
    type: Literal["error"] = "error"


AssistantMessageEvent: TypeAlias = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | DoneEvent
    | ErrorEvent
)
