"""Agent-level messages: the LLM messages plus app-specific ``CustomMessage``s, and the LLM view of them.

The agent keeps everything a conversation needs (UI notes, artifacts, hook output) in one
list; only ``user``, ``assistant`` and ``tool_result`` messages reach the model unless a
``convert_to_llm`` hook says otherwise.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm import AssistantMessage, Message, ToolResultMessage, UserContent, UserMessage, now_ms


@dataclass(slots=True)
class CustomMessage:
    """An app-specific message that lives in the conversation but is not sent to the model by default.

    ``custom_type`` names the kind (``"notification"``, ``"artifact"`` …); ``display`` tells
    UIs whether to show it; ``details`` carries whatever structured data the app needs.
    A ``convert_to_llm`` hook may turn it into a user message when the model should see it.
    """

    custom_type: str
    content: str | list[UserContent]
    display: bool = True
    details: Any = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["custom"] = "custom"


LoopMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | CustomMessage
"""Anything that can sit in an agent's conversation."""

_LLM_ROLES = frozenset(("user", "assistant", "tool_result"))


def default_convert_to_llm(messages: list[LoopMessage]) -> list[Message]:
    """Keep the messages the model understands (user, assistant, tool_result); drop custom ones."""
    return [m for m in messages if m.role in _LLM_ROLES]  # type: ignore[misc]


_NOT_YET: list[Message] = []
"""Read only: the output of a view not made yet (a shared empty list, not one for every run)."""


class LlmView:
    """The default LLM view of a growing conversation, updated incrementally.

    Converting the whole history before every model call makes a long conversation cost
    O(n²); conversations only grow at the end, so this cache converts just the new tail.
    When the list is replaced or shrinks (``replace_messages``, ``reset``), or the last
    message it saw is no longer in place, it rebuilds from scratch. A message edited in
    place in the *middle* of the list is not detected: replace the list instead.
    """

    __slots__ = ("_last", "_out", "_seen", "_source")

    def __init__(self) -> None:
        self._source: list[LoopMessage] | None = None
        self._seen = 0
        self._last: LoopMessage | None = None
        self._out: list[Message] = _NOT_YET  # replaced by the first view (a run the engine transforms makes none)

    def view(self, messages: list[LoopMessage]) -> list[Message]:
        """The LLM messages of ``messages`` (the cache's own list: copy it before handing it out)."""
        seen = self._seen
        if messages is not self._source or len(messages) < seen or (seen and messages[seen - 1] is not self._last):
            self._source = messages
            self._out = []
            seen = 0
        n = len(messages)
        if n > seen:
            out = self._out
            for m in messages[seen:] if seen else messages:
                if m.role in _LLM_ROLES:
                    out.append(m)  # type: ignore[arg-type]
            self._seen = n
            self._last = messages[n - 1]
        return self._out
