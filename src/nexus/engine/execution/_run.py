"""One engine run: journal → agent loop (failover, repair, compaction) → result → ledger write.

The agent loop does the model/tool cycle; this class wraps it with what the broker needs:
the crash journal (turn opened up front; the streaming reply, each finished message and tool
call journaled as they come, see ``_journal``), the streaming callbacks, overflow recovery (the
loop ends on an overflow error; the run compacts and continues it), abort and timeout, and the
one-transaction ledger write at the end.

Jobs with a module of their own: opening the turn (``_turn_open``), the end of a run that failed before
it announced one (``_run_end``), the steering receipts (``_steering``), the tool-call records
(``_tool_calls``) and the stop reason (``_outcome``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, TypeAlias

from nexus.agent import (
    AfterToolCallContext,
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentToolResult,
    LoopMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    SteeringQueue,
    SteerMode,
    SteerReceipt,
    ToolExecutionStartEvent,
    agent_loop,
    agent_loop_continue,
)
from nexus.engine.assembly._sessions import SessionCache
from nexus.engine.assembly._window import ContextWindow
from nexus.engine.assembly.repair import truncate_result
from nexus.engine.execution import ledger_map
from nexus.engine.execution._journal import TurnJournal
from nexus.engine.execution._outcome import is_overflow, run_outcome
from nexus.engine.execution._steering import RunSteering
from nexus.engine.execution._tool_calls import ToolCallLog
from nexus.engine.execution._turn_open import open_run_turn
from nexus.engine.execution._writer import ACTIVE_RUN, inline_ok, off_loop
from nexus.engine.execution.events import (
    EventChannel,
    ExecutionState,
    ReasoningDelta,
    ReplyDelta,
    RunEndEvent,
    RunStartEvent,
    StateEvent,
)
from nexus.engine.execution.ledger_map import run_compactions
from nexus.engine.execution.scope import CURRENT_RUN, RunHost, RunScope
from nexus.engine.types import (
    AgentError,
    AgentResult,
    AssembledContext,
    CompactionEndEvent,
    CompactionStartEvent,
    EngineEvent,
    EngineLimits,
    RunStopReason,
)
from nexus.ledger import StoredMessage, TurnWrite
from nexus.llm import (
    AbortSignal,
    AssistantMessage,
    Message,
    Model,
    StreamFn,
    StreamOptions,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolCallEndEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
    add_call_usage,
)

if TYPE_CHECKING:
    from nexus.ledger import Ledger

log = logging.getLogger("nexus.engine")

EngineStreamEvent: TypeAlias = AgentEvent | EngineEvent
"""Everything an execution's event stream carries: the agent loop's events and the engine's own."""


class EngineRun:
    """The state of one execution (see the module docstring); driven by :meth:`main`. Slotted: a
    thousand runs in flight each kept a 1.6 KB attribute dict."""

    __slots__ = ("__weakref__", "_state_changed", "active", "agent_ctx", "calls", "channel", "ctx", "depth", "end",
                 "final_error", "history_len", "journal", "last_assistant", "last_call_usage", "ledger", "limits",
                 "llm_calls", "model", "options", "owners", "resume_state", "runtime", "signal", "started", "state",
                 "steering", "stream_fn", "timed_out", "turn_id", "usage", "window", "wrote_text")  # fmt: skip

    def __init__(
        self,
        ctx: AssembledContext,
        channel: EventChannel,
        *,
        ledger: Ledger | None,
        model: Model,
        stream_fn: StreamFn,
        limits: EngineLimits,
        options: StreamOptions,
        depth: int,
        runtime: RunHost | None,
        cache: SessionCache | None = None,
        steering: SteeringQueue | None = None,
    ) -> None:
        self.ctx = ctx
        self.channel = channel
        self.ledger = ledger
        self.model = model
        self.stream_fn = stream_fn
        self.limits = limits
        self.options = options
        self.depth = depth
        self.runtime = runtime
        self.signal = ctx.abort_signal or AbortSignal()  # the execution's own (linked to its caller's)
        self.state: ExecutionState = "starting"
        self.resume_state: ExecutionState = "starting"
        self._state_changed: asyncio.Event | None = None
        self.wrote_text = False
        self.agent_ctx = AgentContext(ctx.system_prompt, [*ctx.history], list(ctx.tools))
        self.history_len = len(ctx.history)
        self.window = ContextWindow.for_history(
            ctx.history,
            model=model,
            stream_fn=stream_fn,
            limits=limits,
            budget=ctx.token_budget,
            emit=self.engine_event,
            estimates=ctx.history_estimates,
            cache=cache,
        )
        ctx.history_estimates = None  # the window's now (it extends the list as the conversation grows)
        self.turn_id: str | None = None
        self.owners: list[str] | None = None  # the turn of each history message, once a compaction needs them
        self.journal: TurnJournal | None = None
        self.steering = RunSteering(steering, channel.publish)  # not self.publish: no cycle through the run
        self.active = False
        self.timed_out = False
        self.final_error: AgentError | None = None
        self.end: AgentEndEvent | None = None
        self.usage = Usage()
        self.last_call_usage: Usage | None = None
        self.llm_calls = 0
        self.calls = ToolCallLog()
        self.last_assistant: AssistantMessage | None = None
        self.started = time.monotonic()

    # ------------------------------------------------------------------ events out

    def publish(self, event: object) -> None:
        """Put one event on the run's channel (listeners' errors are logged, never raised)."""
        self.channel.publish(event)

    def set_state(self, state: ExecutionState) -> None:
        """Move to ``state`` and announce it (a ``state`` event and ``state_changed``)."""
        previous = self.state
        if previous == state or previous == "done":
            return
        self.state = state
        self.channel.publish_new(StateEvent, state, previous)
        if self._state_changed is not None:
            self._state_changed.set()
            self._state_changed = None

    async def state_change(self) -> None:
        """Wait for the next :meth:`set_state` (the event is made only for a waiter: most runs have none)."""
        if self._state_changed is None:
            self._state_changed = asyncio.Event()
        await self._state_changed.wait()

    def engine_event(self, event: EngineEvent) -> None:
        """Retry/wait/fallback events from failover and compaction events from the window."""
        if isinstance(event, CompactionStartEvent):
            self.resume_state = self.state
            self.set_state("compacting")
        self.publish(event)
        if isinstance(event, CompactionEndEvent):
            self.set_state(self.resume_state)

    # ------------------------------------------------------------------ the run

    async def main(self) -> AgentResult:
        """Open the turn, run the loop (with overflow recovery), build the result, write the turn
        (counted as an active run throughout: see ``nexus.engine.execution._writer``).

        The loop's events are drained here, in the run's own coroutine: on an overflow before any output the run
        recovers one level and continues the loop. (That was two coroutines more, held by every run in flight.)
        """
        with ACTIVE_RUN:
            timer = await self.opened()  # when it raises, the execution announces the end
            try:
                events = agent_loop(self.ctx.current_message, self.agent_ctx, self.loop_config(), self.signal)
                while True:
                    end: AgentEndEvent | None = None  # made only if the loop ends without one
                    async for event in events:
                        if not isinstance(event, MessageUpdateEvent):  # deltas are published as reply/reasoning deltas
                            self.publish(event)
                        self.handle(event)
                        if self.journal is not None and self.journal.pending is not None:
                            await self.journal.drain()  # an ended tool call / message is on disk before the run goes on
                        if isinstance(event, AgentEndEvent):
                            end = event
                    if not await self.recovered(end):
                        break
                    events = agent_loop_continue(self.agent_ctx, self.loop_config(), self.signal)
            except asyncio.CancelledError:
                self.cancelled()
                raise
            except Exception as exc:  # an engine bug must still close the turn
                log.exception("engine run %s failed", self.ctx.run_id)
                self.final_error = AgentError("unknown", f"the engine failed: {type(exc).__name__}: {exc}")
            finally:
                timer.cancel()
                self.active = False
            return await self.concluded()

    async def opened(self) -> asyncio.TimerHandle:
        """The run starts: its turn opened (with a ledger), its journal, scope and timeout; ``run_start``."""
        if self.ledger is not None:
            await open_run_turn(self, self.ledger)
        if self.ledger is not None and self.turn_id is not None:
            self.journal = TurnJournal(self.ledger, self.turn_id)
        CURRENT_RUN.set(
            RunScope(
                self.ctx.session_label, self.turn_id, self.depth, self.model, self.runtime, self.signal, self.limits
            )
        )
        timer = asyncio.get_running_loop().call_later(self.ctx.timeout_ms / 1000, self.on_timeout)
        self.active = True
        self.channel.publish_new(RunStartEvent, self.turn_id, self.ctx.parent_turn_id)
        return timer

    async def recovered(self, end: AgentEndEvent | None) -> bool:
        """The loop ended with ``end``: True when it ended on an overflow before any output and the run recovered
        one level (the loop continues), False when the run is over."""
        if end is None:
            end = AgentEndEvent(reason="error", error="the agent loop ended without agent_end")
        self.end = end
        messages = self.agent_ctx.messages
        failed = messages[-1] if messages else None
        if not is_overflow(end, failed) or self.signal.aborted:
            return False
        assert isinstance(failed, AssistantMessage)
        messages.pop()  # the failed call is retried on a smaller context, not kept
        self.llm_calls -= 1
        error = await self.window.recover(ledger_map.llm_messages(messages), self.signal, failed.error_message)
        if error is not None or self.signal.aborted:
            messages.append(failed)
            self.final_error = error
            return False
        return True

    def cancelled(self) -> None:
        """The run's task was cancelled: abort, and write the turn here, on the loop (on PostgreSQL it waits there)."""
        self.signal.abort("the run's task was cancelled")
        self.close_steering()
        cancelled = self.build_result()
        try:
            if self.journal is not None:
                self.journal.stop()
            self.persist(cancelled)
        finally:
            self.finish(cancelled)

    async def concluded(self) -> AgentResult:
        """The loop is over: return the steers not injected, build the result and write the turn (off the loop)."""
        self.set_state("finishing")
        self.close_steering()
        await self.load_owners()
        result = self.build_result()
        try:
            await self.persist_off_loop(result)
        finally:
            self.finish(result)
        return result

    def finish(self, result: AgentResult) -> None:
        """Announce the end (``run_end``), close the channel, drop the callbacks into this run its parts hold."""
        self.channel.publish_new(RunEndEvent, result, result.error is not None and self.wrote_text)
        self.set_state("done")
        self.channel.close()
        self.window.emit = self.channel.publish  # they were cycles: refcounting now frees an ended run, not the gc
        self.steering.detach()

    def on_timeout(self) -> None:
        """``timeout_ms`` passed: abort, and remember why so the result says ``timeout``."""
        if not self.signal.aborted:
            self.timed_out = True
            self.signal.abort(f"timeout: the run exceeded timeout_ms={self.ctx.timeout_ms}")

    def loop_config(self) -> AgentLoopConfig:
        """The agent loop's config; ``max_iterations`` is what is left of the run's budget of model calls."""
        remaining = max(1, self.limits.max_iterations - self.llm_calls)
        take = self.take_steering  # one bound method for both hooks, not two
        return AgentLoopConfig(
            model=self.model,
            stream_fn=self.stream_fn,
            options=self.options,
            transform_context=self.transform,
            get_steering_messages=take,
            get_follow_up_messages=take,  # a steer that came after the last safe point becomes a follow-up
            after_tool_call=self.after_tool_call,
            max_iterations=remaining,
        )

    # ------------------------------------------------------------------ loop hooks

    async def transform(self, messages: list[LoopMessage], signal: AbortSignal) -> list[LoopMessage]:
        """Before every model call: proactive compaction if due, then the repaired, capped payload."""
        conversation = ledger_map.llm_messages(messages)
        await self.window.maybe_compact(conversation, self.signal)
        return self.window.payload(conversation)  # type: ignore[return-value]  # a fresh list each call

    def take_steering(self) -> list[LoopMessage]:
        """Steering messages queued since the last safe point (one, or every pending ``all`` steer); also polled
        when the loop would stop, so a steer that came after the last safe point becomes a follow-up."""
        return list(self.steering.take())

    def after_tool_call(self, hook: AfterToolCallContext, signal: AbortSignal) -> AgentToolResult:
        """Cap each new tool result at ``max_tool_result_chars`` (what the model and the ledger get)."""
        return truncate_result(hook.result, self.limits.max_tool_result_chars)

    def steer(
        self, message: str | UserMessage, *, id: str | None = None, mode: SteerMode = "all", source: str = "steer"
    ) -> SteerReceipt:
        """Offer ``message`` for the next safe point; the receipt ends ``delivered`` or ``returned``."""
        return self.steering.offer(
            message, id=id, mode=mode, source=source, aborted=self.abort_reason(), compacting=self.window.compacting
        )

    def close_steering(self) -> None:
        """The run is over: every steer not yet injected is returned (listed in the result)."""
        self.steering.close(self.abort_reason())

    def abort_reason(self) -> str | None:
        """Why the run was aborted (``None`` while it was not)."""
        return (self.signal.reason or "aborted") if self.signal.aborted else None

    # ------------------------------------------------------------------ event handling

    def handle(self, event: AgentEvent) -> None:
        """Turn one loop event into callbacks, tool-call records and journal writes."""
        if isinstance(event, MessageUpdateEvent):
            delta = event.assistant_event
            journal = self.journal
            channel = self.channel
            if isinstance(delta, TextDeltaEvent):
                self.wrote_text = True
                if channel.watched:
                    channel.publish(ReplyDelta(delta.delta, len(self.agent_ctx.messages) - self.history_len))
                else:
                    channel.seq += 1  # nobody listens: count it, build nothing (the hot path)
                if journal is not None:
                    journal.grew(len(delta.delta))
            elif isinstance(delta, ThinkingDeltaEvent):
                if channel.watched:
                    channel.publish(ReasoningDelta(delta.delta, len(self.agent_ctx.messages) - self.history_len))
                else:
                    channel.seq += 1
                if journal is not None:
                    journal.grew(len(delta.delta))
            else:
                channel.publish(event)  # other progress (tool-call arguments streaming): droppable
                if isinstance(delta, ToolCallEndEvent) and journal is not None:
                    journal.call_done(delta.content_index, delta.tool_call.id)
        elif isinstance(event, MessageStartEvent):
            if isinstance(event.message, AssistantMessage):
                if self.journal is not None:
                    self.journal.start(event.message)
                self.set_state("streaming")
        elif isinstance(event, MessageEndEvent):
            self.message_done(event.message)
        elif isinstance(event, ToolExecutionStartEvent):
            self.set_state("tools")
            self.calls.started(event.tool_call_id, event.tool_name, event.args)

    def message_done(self, message: object) -> None:
        """A message joined the conversation: account for it and journal it."""
        if isinstance(message, AssistantMessage):
            self.assistant_done(message)
        elif isinstance(message, ToolResultMessage):
            self.tool_result_done(message)
        elif isinstance(message, UserMessage) and message is not self.ctx.current_message:
            self.steering.joined(message, len(self.agent_ctx.messages) - 1 - self.history_len)
            if self.journal is not None:
                self.journal.message(message)  # a steering / follow-up message (the query is stored already)

    def assistant_done(self, message: AssistantMessage) -> None:
        """Count usage; journal the ended response (a tool-calling one before its tools run)."""
        add_call_usage(self.usage, message.usage)
        self.last_call_usage = message.usage
        self.llm_calls += 1
        self.last_assistant = message
        if message.stop_reason not in ("error", "aborted"):
            self.window.reset()
        if self.journal is not None:
            self.journal.end(message)

    def tool_result_done(self, result: ToolResultMessage) -> None:
        """Finish the tool call's record and journal the call with its result."""
        record = self.calls.finished(result)
        if self.journal is None:
            return
        call = next(
            (c for c in (self.last_assistant.tool_calls if self.last_assistant else []) if c.id == result.tool_call_id),
            None,
        )
        call = call or ToolCall(result.tool_call_id, result.tool_name, dict(record.arguments))
        self.journal.tool_call(call, result, record.started_at, result.timestamp, record.spawned_session_label)

    # ------------------------------------------------------------------ result

    def build_result(self) -> AgentResult:
        """The :class:`AgentResult` of the run so far (query echo + everything the run added).

        Message ids are the ordinals here; :meth:`persist` replaces the messages with the
        ledger's rows once the turn is written, so the ids are the ledger's.
        """
        response = ledger_map.llm_messages(self.agent_ctx.messages[self.history_len + 1 :])
        turn = [self.ctx.current_message, *response]
        stop_reason, error = self.outcome(response)
        turn_id = self.turn_id or ""
        return AgentResult(
            messages=[StoredMessage(i, turn_id, i, m.role, m) for i, m in enumerate(turn)],
            tool_calls=self.calls.records(),
            usage=self.usage,
            stop_reason=stop_reason,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            error=error,
            compactions=run_compactions(self.ledger, self.ctx, self.window.compactions, self.turn_id, self.owners),
            last_call_usage=self.last_call_usage,
            returned_steers=list(self.steering.returned),
            turn_id=self.turn_id,
        )

    async def load_owners(self) -> None:
        """Which turn each history message belongs to, read once a run compacted (see ``history_turn_ids``)."""
        if self.window.compactions and self.ledger is not None and self.turn_id is not None:
            self.owners = await ledger_map.history_turn_ids(self.ledger, self.ctx.session_label, self.ctx.history)

    def outcome(self, response: list[Message]) -> tuple[RunStopReason, AgentError | None]:
        """Seed 000's stop reason (and error) from how the loop ended (see ``_outcome``)."""
        return run_outcome(
            response,
            end=self.end,
            timed_out=self.timed_out,
            timeout_ms=self.ctx.timeout_ms,
            final_error=self.final_error,
            aborted=self.signal.aborted,
        )

    async def persist_off_loop(self, result: AgentResult) -> None:
        """:meth:`persist` on the ledger writer thread (after every journal write the run queued); a broker's turn
        on SQLite, when it would run inline, joins the queue's next group commit instead (``write_result_grouped``)."""
        if self.ledger is None or self.turn_id is None:
            return
        if self.journal is not None:
            self.journal.stop()
        if self.ctx.queue_item_ids and self.ledger.inline and inline_ok():
            closing = self.closing(result, self.turn_id)
            result.messages = await ledger_map.write_result_grouped(self.ledger, closing, self.ctx.run_id)
        else:
            await off_loop(lambda: self.persist(result), inline=self.ledger.inline)

    def persist(self, result: AgentResult) -> None:
        """Close the opened turn with the result (one transaction); then the result's messages are the ledger's."""
        if self.ledger is not None and self.turn_id is not None:  # else no journal either
            turn_id = ledger_map.write_result(self.ledger, self.closing(result, self.turn_id), self.ctx.run_id)
            result.messages = self.ledger.run_here(lambda here: here.turns.messages(turn_id))

    def closing(self, result: AgentResult, turn_id: str) -> TurnWrite:
        """Stop journaling (waits for a journal write in progress); the write closing ``turn_id`` with ``result``."""
        if self.journal is not None:
            self.journal.close()
        response, steering = ledger_map.llm_messages(self.agent_ctx.messages[self.history_len + 1 :]), self.steering
        return ledger_map.result_record(self.ctx, turn_id, result, response, result.compaction, steering.delivered_ids,
                                        steering.response_sources(len(response)), self.abort_reason())  # fmt: skip
