"""``Agent``: a stateful conversation around ``agent_loop`` with subscriptions, steering and follow-ups.

The agent owns one conversation (``state.messages``), runs one prompt at a time, and keeps
``state`` current from the run's events so a UI can render it at any moment. Messages
sent while it runs go to one of two queues: ``steer()`` (injected after the current tool
batch, before the next model call) or ``follow_up()`` (run when it would otherwise stop).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import field, replace
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.agent.config import (
    DEFAULT_MAX_ITERATIONS,
    AfterToolCallFn,
    AgentBusyError,
    AgentContext,
    AgentLoopConfig,
    AgentStateError,
    ApiKeyFn,
    BeforeToolCallFn,
    ConvertToLlmFn,
    ToolExecutionMode,
    TransformContextFn,
)
from nexus.agent.events import (
    AgentEndEvent,
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from nexus.agent.loop import agent_loop, agent_loop_continue
from nexus.agent.messages import AgentMessage, LlmView
from nexus.agent.tool_types import AgentTool
from nexus.llm.abort import AbortSignal
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.types import AssistantMessage, ImageContent, Model, TextContent, ThinkingLevel, UserContent, UserMessage

_log = logging.getLogger("nexus.agent")

QueueMode: TypeAlias = Literal["one-at-a-time", "all"]
"""How many queued messages are injected at once: one per turn, or all of them."""

AgentListener: TypeAlias = Callable[[AgentEvent], None]


@dataclass(slots=True)
class AgentState:
    """What a UI needs to render the agent at any moment.

    ``stream_message`` is the assistant message being streamed (``None`` between
    messages); ``pending_tool_calls`` holds the ids of tool calls that have started and not
    yet ended; ``error`` is the last run's failure, if any.
    """

    model: Model
    system_prompt: str = ""
    thinking_level: ThinkingLevel = "off"
    tools: list[AgentTool] = field(default_factory=list)
    messages: list[AgentMessage] = field(default_factory=list)
    is_streaming: bool = False
    stream_message: AssistantMessage | None = None
    pending_tool_calls: set[str] = field(default_factory=set)
    error: str | None = None


def _as_message(message: str | AgentMessage) -> AgentMessage:
    return UserMessage(message) if isinstance(message, str) else message


class Agent:
    """One conversation with a model and its tools (see module doc).

    ``prompt()`` and ``continue_()`` run to completion (await them, or run them as a
    task and use ``wait_for_idle()``); listeners added with ``subscribe()`` see every event.
    """

    def __init__(
        self,
        *,
        model: Model,
        system_prompt: str = "",
        thinking_level: ThinkingLevel = "off",
        tools: Sequence[AgentTool] = (),
        messages: Sequence[AgentMessage] = (),
        stream_fn: StreamFn | None = None,
        options: StreamOptions | None = None,
        convert_to_llm: ConvertToLlmFn | None = None,
        transform_context: TransformContextFn | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        tool_execution: ToolExecutionMode = "parallel",
        before_tool_call: BeforeToolCallFn | None = None,
        after_tool_call: AfterToolCallFn | None = None,
        max_iterations: int | None = DEFAULT_MAX_ITERATIONS,
        get_api_key: ApiKeyFn | None = None,
    ) -> None:
        self.state = AgentState(model, system_prompt, thinking_level, list(tools), list(messages))
        self.stream_fn = stream_fn
        self.options = options or StreamOptions()
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.steering_mode: QueueMode = steering_mode
        self.follow_up_mode: QueueMode = follow_up_mode
        self.tool_execution: ToolExecutionMode = tool_execution
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.max_iterations = max_iterations
        self.get_api_key = get_api_key
        self._listeners: list[AgentListener] = []
        self._steering: deque[AgentMessage] = deque()
        self._follow_ups: deque[AgentMessage] = deque()
        self._signal: AbortSignal | None = None
        self._idle: asyncio.Event | None = None
        self._llm_view = LlmView()

    # ------------------------------------------------------------------ running

    @property
    def is_running(self) -> bool:
        """True from the start of ``prompt()``/``continue_()`` until its run has ended."""
        return self._signal is not None

    async def prompt(
        self,
        message: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
    ) -> None:
        """Send a prompt (text with optional images, one message, or several) and run until the agent stops.

        Raises :class:`AgentBusyError` while a run is in progress (use ``steer()`` or ``follow_up()``).
        """
        self._check_idle("prompt()")
        if isinstance(message, str):
            content: str | list[UserContent] = [TextContent(message), *images] if images else message
            prompts: list[AgentMessage] = [UserMessage(content)]
        elif isinstance(message, (list, tuple)):
            prompts = list(message)
        else:
            prompts = [message]  # type: ignore[list-item]
        await self._run(prompts)

    async def continue_(self) -> None:
        """Let the model respond to the conversation as it is (after an abort, error or the iteration guard).

        If the last message is an assistant reply, queued steering messages (else follow-ups)
        become the prompt; with nothing queued that raises :class:`AgentStateError`.
        """
        self._check_idle("continue_()")
        messages = self.state.messages
        if messages and isinstance(messages[-1], AssistantMessage):
            queued = self._take(self._steering, self.steering_mode) or self._take(self._follow_ups, self.follow_up_mode)
            if not queued:
                raise AgentStateError(
                    "Nothing to continue: the last message is the assistant's reply and no message is queued. "
                    "Use prompt() to say something new."
                )
            await self._run(queued)
            return
        await self._run(None)

    def abort(self) -> None:
        """Stop the current run: streaming ends ``aborted`` (partial kept); running tools get the signal."""
        if self._signal is not None:
            self._signal.abort()

    async def wait_for_idle(self) -> None:
        """Return once no run is in progress."""
        if self._idle is not None:
            await self._idle.wait()

    def _check_idle(self, what: str) -> None:
        if self.is_running:
            raise AgentBusyError(
                f"Cannot call {what} while the agent is running. Use steer() to interrupt it after the current "
                "tool calls, or follow_up() to queue a message for when it finishes (or await wait_for_idle())."
            )

    def _config(self) -> AgentLoopConfig:
        options = self.options
        if options.thinking != self.state.thinking_level:
            options = replace(options, thinking=self.state.thinking_level)
        return AgentLoopConfig(
            model=self.state.model,
            stream_fn=self.stream_fn,
            options=options,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_steering_messages=lambda: self._take(self._steering, self.steering_mode),
            get_follow_up_messages=lambda: self._take(self._follow_ups, self.follow_up_mode),
            tool_execution=self.tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            max_iterations=self.max_iterations,
            get_api_key=self.get_api_key,
        )

    async def _run(self, prompts: list[AgentMessage] | None) -> None:
        state = self.state
        signal = AbortSignal()
        self._signal = signal
        self._idle = asyncio.Event()
        state.error = None
        state.is_streaming = True
        try:
            context = AgentContext(state.system_prompt, state.messages, list(state.tools), self._llm_view)
            config = self._config()
            events: AsyncIterator[AgentEvent]
            if prompts is None:
                events = agent_loop_continue(context, config, signal)
            else:
                events = agent_loop(prompts, context, config, signal)
            async for event in events:
                self._handle(event)
        except Exception as exc:
            # Configuration problems raised before the loop started (bad max_iterations, no stream function…).
            state.error = str(exc)
            raise
        finally:
            state.is_streaming = False
            state.stream_message = None
            state.pending_tool_calls.clear()
            self._signal = None
            self._idle.set()

    def _handle(self, event: AgentEvent) -> None:
        state = self.state
        if isinstance(event, (MessageStartEvent, MessageUpdateEvent)):
            if isinstance(event.message, AssistantMessage):
                state.stream_message = event.message
        elif isinstance(event, MessageEndEvent):
            state.stream_message = None
        elif isinstance(event, ToolExecutionStartEvent):
            state.pending_tool_calls.add(event.tool_call_id)
        elif isinstance(event, ToolExecutionEndEvent):
            state.pending_tool_calls.discard(event.tool_call_id)
        elif isinstance(event, AgentEndEvent):
            state.error = event.error
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                _log.exception("agent listener %r failed on %s", listener, event.type)

    # ------------------------------------------------------------------ subscriptions and queues

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Call ``listener`` with every event of every run; returns a function that unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def steer(self, message: str | AgentMessage) -> None:
        """Queue a message injected at the next safe point: after the running tool calls, before the next model call."""
        self._steering.append(_as_message(message))

    def follow_up(self, message: str | AgentMessage) -> None:
        """Queue a message the agent handles when it would otherwise stop."""
        self._follow_ups.append(_as_message(message))

    def clear_steering_queue(self) -> None:
        """Drop the queued steering messages."""
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        """Drop the queued follow-up messages."""
        self._follow_ups.clear()

    def clear_all_queues(self) -> None:
        """Drop every queued message."""
        self._steering.clear()
        self._follow_ups.clear()

    def has_queued_messages(self) -> bool:
        """True when a steering or follow-up message is waiting."""
        return bool(self._steering or self._follow_ups)

    @staticmethod
    def _take(queue: deque[AgentMessage], mode: QueueMode) -> list[AgentMessage]:
        if not queue:
            return []
        if mode == "all":
            taken = list(queue)
            queue.clear()
            return taken
        return [queue.popleft()]

    # ------------------------------------------------------------------ state mutators

    def set_system_prompt(self, system_prompt: str) -> None:
        """Use ``system_prompt`` from the next model call of the next run."""
        self.state.system_prompt = system_prompt

    def set_model(self, model: Model) -> None:
        """Switch model for the next run (the conversation is replayable on any provider)."""
        self.state.model = model

    def set_thinking_level(self, level: ThinkingLevel) -> None:
        """Set the reasoning effort for the next run."""
        self.state.thinking_level = level

    def set_tools(self, tools: Sequence[AgentTool]) -> None:
        """Replace the tools offered from the next run on."""
        self.state.tools = list(tools)

    def set_steering_mode(self, mode: QueueMode) -> None:
        """Inject steering messages one per turn or all at once."""
        self.steering_mode = mode

    def set_follow_up_mode(self, mode: QueueMode) -> None:
        """Run follow-up messages one at a time or all at once."""
        self.follow_up_mode = mode

    def replace_messages(self, messages: Sequence[AgentMessage]) -> None:
        """Replace the whole conversation (e.g. after compaction or loading a session); not while running."""
        self._check_idle("replace_messages()")
        self.state.messages = list(messages)

    def append_message(self, message: AgentMessage) -> None:
        """Add a message to the conversation without running the model; not while running."""
        self._check_idle("append_message()")
        self.state.messages.append(message)

    def clear_messages(self) -> None:
        """Empty the conversation; not while running."""
        self._check_idle("clear_messages()")
        self.state.messages = []

    def reset(self) -> None:
        """Forget the conversation, the queues and the last error (``abort()`` and ``wait_for_idle()`` first)."""
        self._check_idle("reset()")
        self.state.messages = []
        self.state.error = None
        self.state.stream_message = None
        self.state.pending_tool_calls.clear()
        self.clear_all_queues()
