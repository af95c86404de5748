"""Per-request options and the stream-function contract every provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import field
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.types import Context, Model, ThinkingLevel

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``auto``, ``none``, ``required``, or the name of the one tool the model must call."""


@dataclass(slots=True)
class StreamOptions:
    """Knobs of one model call. ``None`` means the provider's or model's default.

    ``api_key``/``base_url`` override the model's and the environment's
    (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``*_BASE_URL``). ``timeout`` is seconds
    without progress (connect, or between two chunks) before the call fails as
    ``timeout``. ``signal`` aborts the call, ending it with ``stop_reason="aborted"``.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    thinking: ThinkingLevel = "off"
    tool_choice: ToolChoice | None = None
    api_key: str | None = None
    base_url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = 120.0
    signal: AbortSignal | None = None
    session_id: str | None = None


StreamFn: TypeAlias = Callable[[Model, Context, "StreamOptions | None"], AsyncIterator[AssistantMessageEvent]]
"""What a provider (or the scripted test model) implements: events ending in done/error."""
