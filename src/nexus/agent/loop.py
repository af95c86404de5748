"""The agent loop: prompt → model → tool calls → tools → model … as an async iterator of events.

``agent_loop`` starts a run with new prompt messages; ``agent_loop_continue`` resumes a
conversation whose last message is a user message or a tool result (after an abort, an
error or the iteration guard). Both append every new message to ``context.messages``.

The loop never raises for things the model or a tool did wrong: provider failures end the
run with an ``error``/``aborted`` assistant message, tool failures become error results,
and an unexpected exception (a hook or stream function that raises) becomes an assistant
message with ``stop_reason="error"`` naming the exception, followed by ``turn_end`` and
``agent_end`` — never a silent empty reply.

Per model call the loop does O(new messages) work with the default conversion; the one
O(history) step left is the C-level copy of the LLM message list handed to the stream
function (so the provider owns a list the loop will not append to).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from inspect import isawaitable
from typing import Any, Literal

from nexus.agent._tool_exec import ToolBatch, _resolve, exception_text
from nexus.agent.config import AgentContext, AgentLoopConfig, AgentStateError, MessageSourceFn
from nexus.agent.events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from nexus.agent.messages import LoopMessage, default_convert_to_llm
from nexus.errors import ConfigError
from nexus.llm import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    Message,
    StartEvent,
    StreamFn,
    StreamOptions,
    Tool,
    ToolCall,
    ToolResultMessage,
)


def resolve_default_stream_fn() -> StreamFn:
    """``nexus.llm``'s ``stream`` entry point, imported on first use (keeps ``import nexus.agent`` light)."""
    fn: Any = getattr(importlib.import_module("nexus.llm"), "stream", None)
    if fn is None:
        raise ConfigError(
            "No stream function: nexus.llm.stream is not available. "
            "Pass stream_fn= in AgentLoopConfig with a provider's or nexus.testing's stream function."
        )
    return fn  # type: ignore[no-any-return]


class _Run:
    """Mutable state of one run (what the loop needs to recover cleanly from an exception)."""

    __slots__ = (
        "batch",
        "config",
        "context",
        "ended",
        "in_turn",
        "iterations",
        "llm_tools",
        "new_messages",
        "options",
        "partial",
        "signal",
        "stream_fn",
        "tools",
    )

    def __init__(self, context: AgentContext, config: AgentLoopConfig, signal: AbortSignal | None) -> None:
        if config.max_iterations is not None and config.max_iterations < 1:
            raise ConfigError(f"max_iterations must be at least 1 (or None for no limit), got {config.max_iterations}")
        if config.tool_execution not in ("parallel", "sequential"):
            raise ConfigError(f"tool_execution must be 'parallel' or 'sequential', got {config.tool_execution!r}")
        self.context = context
        self.config = config
        self.signal = signal if signal is not None else AbortSignal()
        self.stream_fn = config.stream_fn or resolve_default_stream_fn()
        self.tools = tuple(context.tools)  # by name only while a batch runs (a dict held ~180 bytes a run meanwhile)
        self.llm_tools: list[Tool] = [t.as_llm_tool() for t in context.tools]
        options = config.options
        self.options: StreamOptions = options if options.signal is self.signal else replace(options, signal=self.signal)
        self.new_messages: list[LoopMessage] = []
        self.partial: AssistantMessage | None = None
        self.batch: ToolBatch | None = None
        self.in_turn = False
        self.ended = False  # the run's last events were made (a failed call, max_iterations)
        self.iterations = 0

    def append(self, message: LoopMessage) -> None:
        self.context.messages.append(message)
        self.new_messages.append(message)

    def start_batch(self, message: AssistantMessage, calls: list[ToolCall]) -> ToolBatch:
        """The tool batch of ``message``'s calls, as the run's batch (the tools looked up by name meanwhile)."""
        tools = {t.name: t for t in self.tools}
        self.batch = ToolBatch(message, calls, self.context, self.config, self.signal, tools, self.append)
        return self.batch

    def end_batch(self) -> list[ToolResultMessage]:
        """The results of the batch that ran (none without one); the run has no batch from now on."""
        batch, self.batch = self.batch, None
        return batch.results if batch is not None else []

    def add(self, message: LoopMessage) -> Iterator[AgentEvent]:
        """message_start, append, message_end (for prompts, injected messages and loop-made messages)."""
        yield MessageStartEvent(message)
        self.append(message)
        yield MessageEndEvent(message)


def agent_loop(
    prompts: LoopMessage | Sequence[LoopMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run the agent on new prompt message(s): appends them to ``context`` and iterates the run's events."""
    batch = list(prompts) if isinstance(prompts, (list, tuple)) else [prompts]
    run = _Run(context, config, signal)
    return _loop(run, batch)  # type: ignore[arg-type]


def agent_loop_continue(
    context: AgentContext, config: AgentLoopConfig, signal: AbortSignal | None = None
) -> AsyncIterator[AgentEvent]:
    """Resume ``context`` without a new prompt; its last message must be a user message or a tool result."""
    if not context.messages:
        raise AgentStateError("Cannot continue: the conversation is empty. Start it with a prompt.")
    if isinstance(context.messages[-1], AssistantMessage):
        raise AgentStateError(
            "Cannot continue: the last message is an assistant reply, so the model has nothing to respond to. "
            "Add a user message (prompt) first."
        )
    return _loop(_Run(context, config, signal), [])


async def _poll(source: MessageSourceFn | None) -> list[LoopMessage]:
    if source is None:
        return []
    got = source()
    if isawaitable(got):  # awaited here, not through ``_resolve``: a coroutine fewer on each of a turn's polls
        got = await got
    return list(got) if got else []


async def _loop(run: _Run, prompts: list[LoopMessage]) -> AsyncIterator[AgentEvent]:
    """The run's events: agent_start, its turns, agent_end; an unexpected exception ends it as an error (``_fail``).
    One generator for the run, its model calls inline (no nested one every streamed event goes through)."""
    yield AgentStartEvent()
    yield TurnStartEvent()
    run.in_turn = True
    config = run.config
    try:
        for ev in (event for prompt in prompts for event in run.add(prompt)):
            yield ev
        del prompts  # in the context now: the run's frame need not hold a list of them while it streams
        pending = await _poll(config.get_steering_messages)
        while True:
            more_tool_calls = True
            while more_tool_calls or pending:
                for ev in _next_turn(run, pending):
                    yield ev
                if run.ended:  # at max_iterations
                    return
                stream, final = await _open_stream(run), None
                try:
                    async for event in stream:
                        if isinstance(event, (DoneEvent, ErrorEvent)):
                            final = event.message if isinstance(event, DoneEvent) else event.error
                            break
                        if run.partial is None:
                            run.partial = event.partial
                            yield MessageStartEvent(event.partial)
                            if isinstance(event, StartEvent):
                                continue
                        yield MessageUpdateEvent(event.partial, event)
                        if run.signal.aborted:  # a stream function that ignores the signal still stops here
                            break
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
                message = final if final is not None else _unfinished(run)
                for ev in _call_ended(run, message):
                    yield ev
                if run.ended:  # the model call failed or was aborted: the run ends with it
                    return
                calls = message.tool_calls
                if calls:
                    async for ev in run.start_batch(message, calls).run():
                        yield ev
                for ev in _turn_ended(run, message, run.end_batch()):
                    yield ev
                if run.ended:  # aborted during the tools
                    return
                more_tool_calls = bool(calls)
                pending = await _poll(config.get_steering_messages)
            pending = await _poll(config.get_follow_up_messages)
            if not pending:
                break
        yield AgentEndEvent(run.new_messages)
    except Exception as exc:
        for ev in _fail(run, exc):
            yield ev


def _next_turn(run: _Run, pending: list[LoopMessage]) -> Iterator[AgentEvent]:
    """Before a model call: the run's end at ``max_iterations`` (``ended``), else the turn's start
    (unless the run's first turn started already) and the steering / follow-up messages taken for it."""
    config = run.config
    if config.max_iterations is not None and run.iterations >= config.max_iterations:
        yield from _stop_at_limit(run, pending)
        run.ended = True
        return
    if not run.in_turn:
        yield TurnStartEvent()
        run.in_turn = True
    for message in pending:
        yield from run.add(message)


async def _open_stream(run: _Run) -> AsyncIterator[AssistantMessageEvent]:
    """Start one model call: the context (transformed and converted), the options (with the key asked for)."""
    config = run.config
    run.iterations += 1
    llm_context = Context(run.context.system_prompt, await _llm_messages(run), run.llm_tools)
    options = run.options
    if config.get_api_key is not None:
        key = await _resolve(config.get_api_key(config.model.provider))
        if key:
            options = replace(options, api_key=key)
    return run.stream_fn(config.model, llm_context, options)


def _call_ended(run: _Run, final: AssistantMessage) -> Iterator[AgentEvent]:
    """The model call's final message joins the conversation (message_end); a failed or aborted call ends the
    turn and the run (``ended``)."""
    if run.partial is None:
        yield MessageStartEvent(final)
    run.partial = None
    run.append(final)
    yield MessageEndEvent(final)
    if final.stop_reason == "error" or final.stop_reason == "aborted":
        yield from _stopped(run, final, final.stop_reason)
        run.ended = True


def _turn_ended(run: _Run, message: AssistantMessage, results: list[ToolResultMessage]) -> Iterator[AgentEvent]:
    """The turn's end; the run's too (``ended``) when it was aborted meanwhile."""
    run.in_turn = False
    yield TurnEndEvent(message, results)
    if run.signal.aborted:
        yield AgentEndEvent(run.new_messages, "aborted", "Aborted during tool execution.")
        run.ended = True


def _stopped(run: _Run, message: AssistantMessage, reason: Literal["error", "aborted"]) -> Iterator[AgentEvent]:
    """The model call failed or was aborted: the turn and the run end with it."""
    run.in_turn = False
    yield TurnEndEvent(message, [])
    yield AgentEndEvent(run.new_messages, reason, message.error_message)


def _stop_at_limit(run: _Run, pending: list[LoopMessage]) -> Iterator[AgentEvent]:
    """``max_iterations`` reached: steering/follow-ups already taken from their queue join the conversation
    (not lost: a continue run answers them), then the run ends."""
    for message in pending:
        yield from run.add(message)
    yield _max_iterations_end(run)


def _max_iterations_end(run: _Run) -> AgentEndEvent:
    limit = run.config.max_iterations
    text = (
        f"Stopped after {limit} model calls (max_iterations={limit}) although the model still wanted to continue. "
        "Raise max_iterations (None = no limit) or call continue_() to let it go on."
    )
    return AgentEndEvent(run.new_messages, "max_iterations", text)


async def _llm_messages(run: _Run) -> list[Message]:
    config = run.config
    messages = run.context.messages
    if config.transform_context is None and config.convert_to_llm is None:
        return list(run.context.llm_view.view(messages))
    if config.transform_context is not None:
        transformed = config.transform_context(list(messages), run.signal)
        # the engine's is a coroutine: awaited directly, as in ``_poll``
        messages = await transformed if isawaitable(transformed) else transformed
    if config.convert_to_llm is not None:
        return list(await _resolve(config.convert_to_llm(list(messages))))
    return default_convert_to_llm(messages)


def _unfinished(run: _Run) -> AssistantMessage:
    """The final message when the stream stopped without done/error (aborted, or a broken stream function)."""
    partial = run.partial or AssistantMessage(api=run.config.model.api, provider=run.config.model.provider)
    if run.signal.aborted:
        partial.stop_reason = "aborted"
        partial.error_message = "Request was aborted."
    else:
        partial.stop_reason = "error"
        partial.error_message = "The model stream ended without a done or error event."
    if not partial.model:
        partial.model = run.config.model.id
    return partial


def _fail(run: _Run, exc: Exception) -> Iterator[AgentEvent]:
    """Turn an unexpected exception into a visible error: results for open tool calls, an error reply, the ends."""
    detail, named = exception_text(exc), f"{type(exc).__name__}: "
    text = f"Agent loop failed: {detail if detail.startswith(named) else named + detail}"  # the type named once
    results: list[ToolResultMessage] = []
    if run.batch is not None:
        yield from run.batch.abandon(text)
        results = run.batch.results
        run.batch = None
    if not run.in_turn:
        yield TurnStartEvent()
    model = run.config.model
    partial = run.partial
    message = AssistantMessage(
        content=list(partial.content) if partial is not None else [],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="error",
        error_message=text,
    )
    if partial is not None:
        message.usage = partial.usage
    else:
        yield MessageStartEvent(message)
    run.partial = None
    run.append(message)
    yield MessageEndEvent(message)
    run.in_turn = False
    yield TurnEndEvent(message, results)
    yield AgentEndEvent(run.new_messages, "error", text)
