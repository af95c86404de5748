"""A scripted model: a FIFO of steps replayed as real stream events, no network at all.

Use it wherever a ``StreamFn`` or a ``Model`` is accepted (agent loop, engine, broker) to
test behaviour around the model deterministically: what the model "says" is the script,
what it was sent is recorded in :attr:`ScriptedModel.calls`.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Mapping
from dataclasses import replace

from nexus.llm import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    ErrorKind,
    Model,
    StartEvent,
    StreamFn,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.testing import _chunks
from nexus.testing._pacing import Pace
from nexus.testing._provider_errors import (
    HTML_PAGE,
    Flavor,
    http_error_body,
    http_error_headers,
    overflow_body,
    stream_error_event,
)
from nexus.testing.steps import (
    Cut,
    HtmlError,
    HttpError,
    Malformed,
    Overflow,
    Replay,
    Reply,
    Stall,
    Step,
    StreamError,
    TextPart,
    ThinkingPart,
    check_step,
    resolve,
)

NO_MORE_RESPONSES = "No more scripted responses queued"
REPLAY_NEEDS_SERVER = "replay({path}) needs FakeProviderServer: a capture is provider bytes for a real decoder"
CANCELLED_MESSAGE = "cancelled"


class ScriptedModel:
    """A model whose responses are a script of steps, streamed in small chunks like a provider.

    ``model`` is the :class:`~nexus.llm.Model` to hand to code under test and ``stream`` its
    stream function; :meth:`register` makes ``nexus.llm.stream(scripted.model, ...)`` work.
    Usage is estimated at chars/4; ``tokens_per_second`` > 0 paces the stream: after each delta it waits
    as long as the delta's tokens take at that rate, rounded up to the loop's 1 ms pacing tick (never
    less, at most a tick more; the waits of all scripted streams on a loop share one timer per tick,
    see ``nexus.testing._pacing``).
    """

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        model_id: str = "scripted-1",
        api: str = "scripted",
        provider: str = "scripted",
        model: Model | None = None,
        chunk_chars: int = _chunks.DEFAULT_CHUNK_CHARS,
        tokens_per_second: float = 0.0,
        record: bool = True,
    ) -> None:
        self.model: Model = model or Model(
            id=model_id, provider=provider, api=api, name=model_id, context_window=128_000, max_tokens=16_384
        )
        self.calls: list[Context] = []
        self.record = record
        """Keep a deep copy of each call's context in ``calls`` (off for benchmarks: copying costs a turn)."""
        self.chunk_chars = chunk_chars
        self.tokens_per_second = tokens_per_second
        self._queue: deque[Step] = deque()
        self.append(*steps)

    # ------------------------------------------------------------------ script

    def append(self, *steps: Step) -> None:
        """Queue more steps at the end of the script."""
        for i, step in enumerate(steps):
            self._queue.append(check_step(step, f"step {i}"))

    @property
    def pending(self) -> int:
        """How many steps are still queued."""
        return len(self._queue)

    def assert_complete(self) -> None:
        """Fail the test if scripted steps were never requested (the code called the model less than expected)."""
        if self._queue:
            raise AssertionError(
                f"{len(self._queue)} scripted step(s) never requested after {len(self.calls)} call(s): "
                + ", ".join(type(s).__name__ for s in self._queue)
            )

    def register(self) -> ScriptedModel:
        """Serve ``self.model.api`` from this script in ``nexus.llm.registry`` (returns self)."""
        from nexus.llm import register_api

        register_api(self.model.api, self.stream)
        return self

    def unregister(self) -> None:
        """Remove the registration made by :meth:`register`."""
        from nexus.llm import unregister_api

        unregister_api(self.model.api)

    # ------------------------------------------------------------------ streaming

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        """The ``StreamFn``: consume one step and stream it; never raises, ends in done/error.

        The step is taken when the first event is asked for. One small async iterator for the whole response
        (the events come from one plain generator, the paced waits are plain futures), not an async generator:
        a thousand streams in flight at once each hold one small coroutine frame while they wait, not a
        generator's frame and an entry in the event loop's set of async generators. A consumer that stops
        early calls ``aclose()`` (the engine does), as with any provider's stream.
        """
        return _Stream(self, model, context, options)

    def _next_step(
        self, model: Model, context: Context, partial: AssistantMessage, signal: AbortSignal | None
    ) -> Step | ErrorEvent:
        """Record the call, estimate its input and take the next step: the step to stream, or the call's error."""
        snapshot = copy.deepcopy(context) if self.record else context
        if self.record:
            self.calls.append(snapshot)
        partial.usage.input = _chunks.estimate_tokens(_chunks.context_chars(snapshot))
        if not self._queue:
            return _fail(partial, model, NO_MORE_RESPONSES, "unknown")
        try:
            step = resolve(self._queue.popleft(), snapshot)
        except Exception as exc:  # a bug in the test's from_context function: report, do not raise
            return _fail(partial, model, f"from_context step failed: {type(exc).__name__}: {exc}", "unknown")
        if signal is not None and signal.aborted:
            return _aborted(partial, model, signal)
        if isinstance(step, HttpError | Overflow | HtmlError):
            return self._http_failure(step, partial, model)
        if isinstance(step, Replay):  # a capture holds provider bytes: only a real decoder can read them
            return _fail(partial, model, REPLAY_NEEDS_SERVER.format(path=step.path), "unknown")
        return step

    def _http_failure(
        self, step: HttpError | Overflow | HtmlError, partial: AssistantMessage, model: Model
    ) -> ErrorEvent:
        """Build the response body the fake server would send and classify it as a provider adapter does."""
        from nexus.llm import classify_error, error_text_from_body

        flavor: Flavor = "anthropic" if "anthropic" in model.api else "openai"
        headers: dict[str, str] = {}
        if isinstance(step, Overflow):
            status, body = (
                400,
                json.dumps(overflow_body(flavor if step.style == "auto" else step.style, step.tokens, step.maximum)),
            )
        elif isinstance(step, HtmlError):
            status, body = step.status, HTML_PAGE.format(status=step.status)
        else:
            status, body, headers = step.status, http_error_body(step, flavor), http_error_headers(step)
        message = error_text_from_body(status, body)
        found = classify_error(message, status, headers, body)
        event = _fail(partial, model, message, found.kind)
        event.error.retry_after = found.retry_after
        return event

    async def _interrupt(
        self,
        step: Cut | Malformed | Stall | StreamError,
        partial: AssistantMessage,
        model: Model,
        options: StreamOptions | None,
    ) -> ErrorEvent | None:
        if isinstance(step, Cut):
            message = "connection error: peer closed connection without sending complete message body"
            return _fail(partial, model, message, "network")
        if isinstance(step, Malformed):
            return _fail(partial, model, f"malformed SSE data from provider: {step.data[:200]!r}", "unknown")
        if isinstance(step, StreamError):
            from nexus.llm import classify_error

            flavor: Flavor = "anthropic" if "anthropic" in model.api else "openai"
            message = stream_error_event(step.status, step.message, flavor)[1]
            found = classify_error(message)
            event = _fail(partial, model, message, found.kind)
            event.error.retry_after = found.retry_after
            return event
        signal = options.signal if options is not None else None
        timeout = options.timeout if options is not None else None
        wait = step.seconds if timeout is None else min(step.seconds, timeout)
        if await _sleep_or_abort(wait, signal):
            return _aborted(partial, model, signal)
        if timeout is not None and timeout < step.seconds:
            return _fail(partial, model, f"request timed out (ReadTimeout): no data for {timeout:g} s", "timeout")
        return None


class _Stream:
    """One scripted response, event by event (see :meth:`ScriptedModel.stream`).

    Before each event after the first it waits as the last event's chunk takes at the model's rate (or lets other
    tasks run); the checks come before pulling the next event, which mutates the partial message.
    """

    __slots__ = (
        "_after",
        "_context",
        "_count",
        "_cut_at",
        "_events",
        "_model",
        "_options",
        "_over",
        "_pace",
        "_partial",
        "_reply",
        "_script",
        "_signal",
        "_step",
    )

    def __init__(self, script: ScriptedModel, model: Model, context: Context, options: StreamOptions | None) -> None:
        self._script, self._model, self._options = script, model, options
        self._context: Context | None = context  # until the step is taken
        self._partial: AssistantMessage | None = None
        self._step: Step | None = None
        self._reply: Reply | None = None
        self._events: Iterator[AssistantMessageEvent] | None = None
        self._pace: Pace | None = None
        self._after: AssistantMessageEvent | None = None  # the last event given, whose chunk is waited for
        self._count = 0
        self._cut_at = -1
        self._signal = options.signal if options is not None else None
        self._over = False

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> AssistantMessageEvent:
        # few locals and little stack: this frame is what each stream in flight holds while it waits
        if self._events is None:
            if self._over:
                raise StopAsyncIteration
            failed = self._first()
            if failed is not None:
                return failed
        try:
            if self._after is not None:
                wait = self._chunk_wait()
                await (wait if wait is not None else asyncio.sleep(0))
            if self._count == self._cut_at:  # a scripted interruption after so many events
                failure = await self._interrupt()
                if failure is not None:
                    return self._ended(failure)
        except asyncio.CancelledError:
            # like the provider adapters: a cancelled consumer still gets a final message
            # (the task's cancelling() count stays set so the caller can tell)
            return self._ended(self._aborted())
        return self._pull()

    def _chunk_wait(self) -> asyncio.Future[None] | None:
        """After an event: a future done when its chunk's tokens took their time at the rate; None for a pass
        of the loop only (no rate, or not a chunk), to let other tasks (an aborting caller) run between events."""
        delta, self._after = getattr(self._after, "delta", None), None
        if self._pace is not None and isinstance(delta, str):
            return self._pace.wait(_chunks.estimate_tokens(len(delta)) / self._script.tokens_per_second)
        return None

    def _interrupt(self) -> Awaitable[ErrorEvent | None]:
        assert isinstance(self._step, Cut | Malformed | Stall | StreamError) and self._partial is not None
        return self._script._interrupt(self._step, self._partial, self._model, self._options)

    def _aborted(self) -> ErrorEvent:
        assert self._partial is not None
        return _aborted(self._partial, self._model, self._signal)

    def _pull(self) -> AssistantMessageEvent:
        """The next event (the abort check comes first: pulling mutates the partial message), or the last."""
        if self._signal is not None and self._signal.aborted:
            return self._ended(self._aborted())
        assert self._events is not None and self._partial is not None and self._reply is not None
        event = next(self._events, None)
        if event is None:
            partial, reply = self._partial, self._reply
            self._end()
            _finish_usage(partial, self._model, reply)
            partial.stop_reason = reply.effective_stop_reason
            return DoneEvent(reply.effective_stop_reason, partial)
        self._count += 1
        self._after = event
        return event

    async def aclose(self) -> None:
        """Stop early: the stream ends here and stops listening to the abort signal (as a generator's ``aclose``)."""
        self._end()

    def _first(self) -> ErrorEvent | None:
        """Take the step: set up its events, or end with its error."""
        model, script = self._model, self._script
        partial = self._partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        signal = self._signal
        assert self._context is not None
        step = script._next_step(model, self._context, partial, signal)
        self._context = None
        if isinstance(step, ErrorEvent):
            self._end()
            return step
        self._step, self._reply = step, _chunks.streamed_reply(step)
        if isinstance(step, Cut | Malformed | Stall | StreamError):
            self._cut_at = step.after_chunks
        self._events = _reply_events(self._reply, partial, script.chunk_chars, script.calls)
        self._pace = Pace(signal) if script.tokens_per_second > 0 else None
        return None

    def _ended(self, event: AssistantMessageEvent) -> AssistantMessageEvent:
        self._end()
        return event

    def _end(self) -> None:
        """End the stream: its one abort listener is removed (see nexus.testing._pacing)."""
        self._events, self._over = None, True
        if self._pace is not None:
            self._pace.close()
            self._pace = None


# --------------------------------------------------------------------------- helpers


def by_session(models: Mapping[str, ScriptedModel]) -> StreamFn:
    """One stream function for many sessions, each playing its own script: the call's session
    (``StreamOptions.session_id``, which the engine sets to the session's label) picks the model in ``models``
    (a mapping that may still be filled after this call)."""

    def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        assert options is not None and options.session_id is not None, "the engine names the session of each call"
        return models[options.session_id].stream(model, context, options)

    return stream


def _reply_events(
    reply: Reply, partial: AssistantMessage, chunk: int, calls: list[Context]
) -> Iterator[AssistantMessageEvent]:
    """The events of ``reply`` from the start event on, mutating ``partial`` as each one is produced.

    A tool call the script gave no id gets ``toolu_scripted_<calls so far>_<n>`` (n counts such calls).
    Text is cut into ``chunk``-character pieces as each is needed, never held as a list of them.
    """
    yield StartEvent(partial)
    chunk, unnamed = max(1, chunk), 0
    for part in reply.parts:
        index = len(partial.content)
        if isinstance(part, TextPart):
            block = TextContent("")
            partial.content.append(block)
            yield TextStartEvent(index, partial)
            for at in range(0, len(part.text), chunk):
                piece = part.text[at : at + chunk]
                block.text += piece
                yield TextDeltaEvent(index, piece, partial)
            yield TextEndEvent(index, block.text, partial)
        elif isinstance(part, ThinkingPart):
            thought = ThinkingContent("")
            partial.content.append(thought)
            yield ThinkingStartEvent(index, partial)
            for at in range(0, len(part.thinking), chunk):
                piece = part.thinking[at : at + chunk]
                thought.thinking += piece
                yield ThinkingDeltaEvent(index, piece, partial)
            thought.signature = part.signature
            yield ThinkingEndEvent(index, thought, partial)
        else:
            if not part.id:
                unnamed += 1
            call = ToolCall(id=part.id or f"toolu_scripted_{len(calls)}_{unnamed - 1}", name=part.name, arguments={})
            partial.content.append(call)
            yield ToolCallStartEvent(index, partial)
            arguments = _chunks.arguments_json(part.arguments)
            for at in range(0, len(arguments), chunk):
                yield ToolCallDeltaEvent(index, arguments[at : at + chunk], partial)
            call.arguments = copy.deepcopy(dict(part.arguments))
            yield ToolCallEndEvent(index, call, partial)


def _output_chars(partial: AssistantMessage) -> int:
    total = 0
    for block in partial.content:
        if isinstance(block, TextContent):
            total += len(block.text)
        elif isinstance(block, ThinkingContent):
            total += len(block.thinking)
        else:
            total += len(block.name) + len(_chunks.arguments_json(block.arguments))
    return total


def _finish_usage(partial: AssistantMessage, model: Model, reply: Reply | None) -> None:
    if reply is not None and reply.usage is not None:
        partial.usage = replace(reply.usage)
    else:
        partial.usage.output = _chunks.estimate_tokens(_output_chars(partial))
    _chunks.priced(partial.usage, model)


def _fail(partial: AssistantMessage, model: Model, message: str, kind: ErrorKind) -> ErrorEvent:
    _finish_usage(partial, model, None)
    partial.stop_reason = "error"
    partial.error_message = message
    partial.error_kind = kind
    return ErrorEvent("error", partial)


def _aborted(partial: AssistantMessage, model: Model, signal: AbortSignal | None) -> ErrorEvent:
    _finish_usage(partial, model, None)
    partial.stop_reason = "aborted"
    partial.error_message = signal.reason if signal is not None and signal.aborted else CANCELLED_MESSAGE
    return ErrorEvent("aborted", partial)


async def _sleep_or_abort(seconds: float, signal: AbortSignal | None) -> bool:
    """Sleep ``seconds``; True if ``signal`` aborted first (a stall: exact, unlike the paced chunks).

    One future, one timer and one listener, not ``wait_for(signal.wait())``, which makes a task.
    """
    if signal is None:
        await asyncio.sleep(seconds)
        return False
    if signal.aborted:
        return True
    waiter = asyncio.get_running_loop().create_future()
    timer = waiter.get_loop().call_later(seconds, _wake, waiter)
    remove = signal.add_listener(lambda: _wake(waiter))
    try:
        await waiter
    finally:
        timer.cancel()
        remove()
    return signal.aborted


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
