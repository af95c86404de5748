"""Provider-neutral data of an LLM conversation: content blocks, messages, usage, models.

These are plain slotted dataclasses because they sit on the hot path (one event per
streamed token) and because the ledger stores them: every type here round-trips
through ``to_json()`` / ``from_json()`` (see ``nexus.llm.serde``) without loss, and a
conversation produced by one provider can be replayed against any other.
"""

from __future__ import annotations

import time
from dataclasses import field
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass

StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant message ended. ``error``/``aborted`` messages carry ``error_message``."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high"]
"""Provider-neutral reasoning effort; each provider maps it to its own parameter."""

THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("off", "minimal", "low", "medium", "high")

ErrorKind: TypeAlias = Literal[
    "auth",
    "auth_permanent",
    "rate_limit",
    "billing",
    "overloaded",
    "timeout",
    "network",
    "context_overflow",
    "format",
    "unknown",
    "refusal",
]
"""Classification of a provider failure; drives failover (rotate, back off, compact, give up).

``refusal``: the model (or the provider's safety filter) declined; retrying or rotating keys does not help.
"""

ERROR_KINDS: tuple[ErrorKind, ...] = (
    "auth",
    "auth_permanent",
    "rate_limit",
    "billing",
    "overloaded",
    "timeout",
    "network",
    "context_overflow",
    "format",
    "unknown",
    "refusal",
)


def now_ms() -> int:
    """Current wall-clock time in Unix milliseconds (the unit of every timestamp here)."""
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- content


@dataclass(slots=True)
class TextContent:
    """Plain text. ``signature`` is an opaque provider token some APIs want echoed back."""

    text: str
    signature: str | None = None
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingContent:
    """Model reasoning. ``redacted`` blocks hold an encrypted payload in ``signature``."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ImageContent:
    """An image as base64 ``data`` with its MIME type (``image/png`` …)."""

    data: str
    mime_type: str
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ToolCall:
    """A request from the model to run tool ``name`` with ``arguments`` (parsed JSON object).

    ``raw_arguments`` keeps the text the provider sent when it was not a valid JSON
    object, so the tool layer can tell the model exactly what was wrong.
    """

    id: str
    name: str
    arguments: dict[str, object]
    raw_arguments: str | None = None
    thought_signature: str | None = None
    type: Literal["tool_call"] = "tool_call"


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
ContentBlock: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall


# --------------------------------------------------------------------------- usage


@dataclass(slots=True)
class Cost:
    """Dollar cost of one response, split like ``Usage`` (prices are per million tokens)."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


@dataclass(slots=True)
class Usage:
    """Token counts of one response.

    ``input`` excludes cached tokens (those are ``cache_read``/``cache_write``);
    ``reasoning`` is the part of ``output`` spent thinking, when the provider says;
    ``total`` = input + output + cache_read + cache_write.

    ``estimated`` is True when the server did not report (some of) the counts and they were
    estimated from the text (chars/4), as for llama.cpp's server, which sends no usage: a
    count of 0 is never presented as a measurement.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    total: int = 0
    cost: Cost = field(default_factory=Cost)
    estimated: bool = False


def apply_cost(model: Model, usage: Usage) -> None:
    """Set ``usage.total`` and ``usage.cost`` from the token counts and the model's $/Mtok prices."""
    usage.total = usage.input + usage.output + usage.cache_read + usage.cache_write
    cost = usage.cost
    cost.input = model.input_price * usage.input / 1e6
    cost.output = model.output_price * usage.output / 1e6
    cost.cache_read = model.cache_read_price * usage.cache_read / 1e6
    cost.cache_write = model.cache_write_price * usage.cache_write / 1e6
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write


def add_call_usage(total: Usage, call: Usage) -> None:
    """Fold one LLM call's ``call`` usage into a run's ``total`` (seed 001's rule).

    Input, output, reasoning and every part of the cost are summed; the cache counts are the
    latest call's, because every round trip reports cache reads of about the whole context
    and summing them would inflate the numbers. ``total`` is recomputed from the counts;
    ``estimated`` stays True once any call's usage was estimated.
    """
    total.input += call.input
    total.output += call.output
    total.reasoning += call.reasoning
    total.cache_read = call.cache_read
    total.cache_write = call.cache_write
    total.total = total.input + total.output + total.cache_read + total.cache_write
    total.estimated = total.estimated or call.estimated
    cost, add = total.cost, call.cost
    cost.input += add.input
    cost.output += add.output
    cost.cache_read += add.cache_read
    cost.cache_write += add.cache_write
    cost.total += add.total


# --------------------------------------------------------------------------- messages


@dataclass(slots=True)
class UserMessage:
    """What a person (or another agent, or the runtime) says to the model."""

    content: str | list[UserContent]
    timestamp: int = field(default_factory=now_ms)
    role: Literal["user"] = "user"


@dataclass(slots=True)
class AssistantMessage:
    """One model response, complete or not.

    A failed or aborted response is still an ``AssistantMessage``: ``stop_reason`` is
    ``error``/``aborted``, ``error_message`` says why, ``content`` and ``usage`` hold
    what arrived before the failure. ``error_kind`` and ``retry_after`` (seconds) are
    set for provider errors so failover can decide what to do next.
    """

    content: list[AssistantContent] = field(default_factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    error_kind: ErrorKind | None = None
    retry_after: float | None = None
    response_id: str | None = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        """The concatenated text blocks (no thinking, no tool calls)."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls in the order the model made them."""
        return [b for b in self.content if isinstance(b, ToolCall)]


@dataclass(slots=True)
class ToolResultMessage:
    """The outcome of one tool call, sent back to the model.

    ``details`` is for UIs and the ledger (diffs, exit codes, spill-file paths) and is
    never sent to the model.
    """

    tool_call_id: str
    tool_name: str
    content: list[UserContent]
    is_error: bool = False
    details: dict[str, object] | None = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The concatenated text blocks of the result."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


# --------------------------------------------------------------------------- model / context


@dataclass(slots=True, frozen=True)
class Model:
    """A model on a provider, with what the runtime needs to budget and price it.

    ``api`` is the wire protocol (``anthropic-messages``, ``openai-completions``,
    ``openai-responses``, ``llama-cpp``…); ``provider`` is the vendor or server the
    credentials belong to. Prices are dollars per million tokens. ``base_url`` ``""`` means
    "not set": calls then use ``<PROVIDER>_BASE_URL`` or the provider's default, while a
    URL set here wins over the environment (see :func:`nexus.llm.effective_base_url`).
    """

    id: str
    provider: str
    api: str
    base_url: str = ""
    name: str = ""
    context_window: int = 200_000
    max_tokens: int = 8_192
    input_price: float = 0.0
    output_price: float = 0.0
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    reasoning: bool = False
    image_input: bool = False
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def ref(self) -> str:
        """``provider/id``, the form the CLI and config accept."""
        return f"{self.provider}/{self.id}"


@dataclass(slots=True, frozen=True)
class Tool:
    """A tool as the model sees it: name, description and a JSON-schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, object]


@dataclass(slots=True)
class Context:
    """Everything sent to the model for one call."""

    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
