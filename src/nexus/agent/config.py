"""What an agent run needs: the context it works on, the config that drives it, and its hook types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import Any, Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.agent.messages import LlmView, LoopMessage
from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.errors import NexusError
from nexus.llm import AbortSignal, AssistantMessage, Message, Model, StreamFn, StreamOptions, ToolCall


class AgentStateError(NexusError):
    """The loop cannot do what was asked with this conversation (continue an empty one, or after its reply)."""


@dataclass(slots=True)
class AgentContext:
    """The conversation a run works on.

    The loop **appends** every new message (prompts, injected messages, assistant
    responses, tool results) to ``messages`` in place, so the list is always the whole
    conversation; pass a copy if you need the original untouched. ``llm_view`` caches the
    default LLM conversion between calls (keep the same context object, or the same view,
    across runs of one conversation to avoid re-converting its history).
    """

    system_prompt: str = ""
    messages: list[LoopMessage] = field(default_factory=list)
    tools: list[AgentTool] = field(default_factory=list)
    llm_view: LlmView = field(default_factory=LlmView, repr=False)


@dataclass(slots=True)
class BeforeToolCallContext:
    """What a ``before_tool_call`` hook sees: the call, its validated arguments and the conversation."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    context: AgentContext


@dataclass(slots=True)
class BeforeToolCallResult:
    """Returned by ``before_tool_call`` to stop a call; ``reason`` is what the model is told."""

    block: bool = True
    reason: str | None = None


@dataclass(slots=True)
class AfterToolCallContext:
    """What an ``after_tool_call`` hook sees: the call and the result the tool produced."""

    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    result: AgentToolResult
    context: AgentContext


ConvertToLlmFn: TypeAlias = Callable[[list[LoopMessage]], "list[Message] | Awaitable[list[Message]]"]
TransformContextFn: TypeAlias = Callable[
    [list[LoopMessage], AbortSignal], "list[LoopMessage] | Awaitable[list[LoopMessage]]"
]
MessageSourceFn: TypeAlias = Callable[[], "list[LoopMessage] | Awaitable[list[LoopMessage]]"]
BeforeToolCallFn: TypeAlias = Callable[
    [BeforeToolCallContext, AbortSignal], "BeforeToolCallResult | Awaitable[BeforeToolCallResult | None] | None"
]
AfterToolCallFn: TypeAlias = Callable[
    [AfterToolCallContext, AbortSignal], "AgentToolResult | Awaitable[AgentToolResult | None] | None"
]
ApiKeyFn: TypeAlias = Callable[[str], "str | Awaitable[str | None] | None"]
ToolExecutionMode: TypeAlias = Literal["parallel", "sequential"]

DEFAULT_MAX_ITERATIONS = 200


@dataclass(slots=True)
class AgentLoopConfig:
    """How a run talks to the model and runs tools.

    - ``stream_fn``: the model call; default ``nexus.llm.stream`` (imported on first use).
    - ``options``: template of every call's ``StreamOptions`` (thinking, temperature,
      max_tokens, tool_choice…); the loop fills in ``signal`` and the ``get_api_key`` result.
    - ``transform_context(messages, signal)`` then ``convert_to_llm(messages)`` run before
      every model call on a copy; the stored conversation is never changed by them.
      The default conversion drops custom messages and is incremental (O(new messages)).
    - ``get_steering_messages`` is polled after every turn (and at the start): its messages
      are injected before the next model call. ``get_follow_up_messages`` is polled when
      the agent would otherwise stop.
    - ``tool_execution``: ``parallel`` (calls of one response run concurrently, results
      reported in call order; ``AgentTool.sequential`` tools run alone) or ``sequential``.
    - ``before_tool_call`` may block a call; ``after_tool_call`` may replace a result.
    - ``max_iterations``: the most model calls per run (``None`` = no limit); when reached
      the run ends with ``reason="max_iterations"`` and an error saying so.
    - ``abort_grace``: seconds running tools get to return after an abort before they are
      cancelled (their result then says the call was aborted).
    """

    model: Model
    stream_fn: StreamFn | None = None
    options: StreamOptions = field(default_factory=StreamOptions)
    convert_to_llm: ConvertToLlmFn | None = None
    transform_context: TransformContextFn | None = None
    get_steering_messages: MessageSourceFn | None = None
    get_follow_up_messages: MessageSourceFn | None = None
    tool_execution: ToolExecutionMode = "parallel"
    before_tool_call: BeforeToolCallFn | None = None
    after_tool_call: AfterToolCallFn | None = None
    max_iterations: int | None = DEFAULT_MAX_ITERATIONS
    get_api_key: ApiKeyFn | None = None
    abort_grace: float = 2.0
