"""One engine run: journal → agent loop (failover, repair, compaction) → result → ledger write.

The agent loop does the model/tool cycle; this class wraps it with what the broker needs:
the crash journal (turn opened up front; the streaming reply, each finished message and tool
call journaled as they come, see ``_journal``), the streaming
callbacks, overflow recovery (the loop ends on an overflow error; the run compacts and
continues it), abort and timeout, and the one-transaction ledger write at the end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

from nexus.agent import (
    AfterToolCallContext,
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentToolResult,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionStartEvent,
    agent_loop,
    agent_loop_continue,
)
from nexus.agent import AgentMessage as LoopMessage
from nexus.agent.steering import SteeringQueue, SteerMode, SteerReceipt
from nexus.engine.assembly._sessions import SessionCache
from nexus.engine.assembly._window import ContextWindow
from nexus.engine.assembly.repair import truncate_result
from nexus.engine.execution._journal import TurnJournal
from nexus.engine.execution.events import (
    EventChannel,
    ExecutionState,
    ReasoningDelta,
    ReplyDelta,
    RunEndEvent,
    RunStartEvent,
    StateEvent,
    SteerEvent,
)
from nexus.engine.execution.ledger_map import compaction_record, history_turn_ids, spawned_label, write_result
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
    agent_error_from_message,
)
from nexus.ledger.records import CompactionRecord, StoredMessage, ToolCallRecord
from nexus.llm.abort import AbortSignal
from nexus.llm.events import TextDeltaEvent, ThinkingDeltaEvent, ToolCallEndEvent
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.types import (
    AssistantMessage,
    Message,
    Model,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    add_call_usage,
    now_ms,
)

if TYPE_CHECKING:
    from nexus.ledger import Ledger

log = logging.getLogger("nexus.engine")

EngineStreamEvent: TypeAlias = AgentEvent | EngineEvent
"""Everything an execution's event stream carries: the agent loop's events and the engine's own."""


class EngineRun:
    """The state of one execution (see the module docstring); driven by :meth:`main`."""

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
        env: RunHost | None,
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
        self.env = env
        self.signal = AbortSignal()
        self.unlink: Callable[[], None] = lambda: None
        if ctx.abort_signal is not None:
            outer = ctx.abort_signal
            self.unlink = outer.add_listener(lambda: self.signal.abort(outer.reason or "aborted"))
        self.state: ExecutionState = "starting"
        self.resume_state: ExecutionState = "starting"
        self.state_changed = asyncio.Event()
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
        self.turn_id: str | None = None
        self.journal: TurnJournal | None = None
        self.delivered_steer_ids: list[str] = []
        """Ids of the steers injected into this turn: written with it as consumed queue items (broker)."""
        self.steering = steering if steering is not None else SteeringQueue()
        self.steering.on_settle(self._steer_settled)
        self.active = False
        self.timed_out = False
        self.final_error: AgentError | None = None
        self.end: AgentEndEvent | None = None
        self.usage = Usage()
        self.last_call_usage: Usage | None = None
        self.returned: list[SteerReceipt] = []
        self.llm_calls = 0
        self.calls: dict[str, ToolCallRecord] = {}
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
        self.publish(StateEvent(state, previous))
        self.state_changed.set()
        self.state_changed = asyncio.Event()

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
        """Open the turn, run the loop (with overflow recovery), build the result, write the turn."""
        try:
            self.turn_id = self.open_turn()
        except BaseException:  # e.g. HeadMovedError: the context is stale, nothing was stored
            self.unlink()
            raise
        if self.ledger is not None and self.turn_id is not None:
            self.journal = TurnJournal(self.ledger, self.turn_id)
        CURRENT_RUN.set(RunScope(self.ctx.session_label, self.turn_id, self.depth, self.model, self.env, self.signal))
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.ctx.timeout_ms / 1000, self.on_timeout)
        self.active = True
        self.publish(RunStartEvent(self.turn_id))
        try:
            await self.run_loops()
        except asyncio.CancelledError:
            self.signal.abort("the run's task was cancelled")
            self.close_steering()
            cancelled = self.build_result()
            try:
                self.persist(cancelled)
            finally:
                self.finish(cancelled)
            raise
        except Exception as exc:  # an engine bug must still close the turn
            log.exception("engine run %s failed", self.ctx.run_id)
            self.final_error = AgentError("unknown", f"the engine failed: {type(exc).__name__}: {exc}")
        finally:
            timer.cancel()
            self.unlink()  # a long-lived outer signal must not keep every finished run alive
            self.active = False
        self.set_state("finishing")
        self.close_steering()
        result = self.build_result()
        try:
            self.persist(result)
        finally:
            self.finish(result)
        return result

    def finish(self, result: AgentResult) -> None:
        """Announce the end (``run_end`` with the result) and close the channel."""
        self.publish(RunEndEvent(result, result.error is not None and self.wrote_text))
        self.set_state("done")
        self.channel.close()

    def open_turn(self) -> str | None:
        """Start the crash journal: the turn with its query, status ``streaming``, pointer not moved."""
        if self.ledger is None:
            return None
        ctx = self.ctx
        return self.ledger.open_turn(
            ctx.session_label,
            query_messages=[ctx.current_message],
            model=ctx.model,
            provider=ctx.provider,
            role=ctx.role,
            run_id=ctx.run_id,
            parent_turn_id=ctx.parent_turn_id,
            toolset_name=ctx.toolset_name,
            tools_available=[t.name for t in ctx.tools],
            permissions_granted=list(ctx.permissions_granted),
            source_event_id=ctx.source_event_id,
            workspace_path=ctx.workspace_path or None,
            system_prompt=ctx.system_prompt,
            source=ctx.source,
            context=assembly_metadata(ctx),
        )

    def on_timeout(self) -> None:
        """``timeout_ms`` passed: abort, and remember why so the result says ``timeout``."""
        if not self.signal.aborted:
            self.timed_out = True
            self.signal.abort(f"timeout: the run exceeded timeout_ms={self.ctx.timeout_ms}")

    def loop_config(self) -> AgentLoopConfig:
        """The agent loop's config; ``max_iterations`` is what is left of the run's budget of model calls."""
        remaining = max(1, self.limits.max_iterations - self.llm_calls)
        return AgentLoopConfig(
            model=self.model,
            stream_fn=self.stream_fn,
            options=self.options,
            transform_context=self.transform,
            get_steering_messages=self.take_steering,
            get_follow_up_messages=self.take_follow_ups,
            after_tool_call=self.after_tool_call,
            max_iterations=remaining,
        )

    async def run_loops(self) -> None:
        """Run the loop; on an overflow before any output, recover one level and continue the loop."""
        events = agent_loop(self.ctx.current_message, self.agent_ctx, self.loop_config(), self.signal)
        while True:
            end = await self.consume(events)
            messages = self.agent_ctx.messages
            failed = messages[-1] if messages else None
            if not _is_overflow(end, failed) or self.signal.aborted:
                break
            assert isinstance(failed, AssistantMessage)
            messages.pop()  # the failed call is retried on a smaller context, not kept
            self.llm_calls -= 1
            error = await self.window.recover(_llm(messages), self.signal, failed.error_message)
            if error is not None or self.signal.aborted:
                messages.append(failed)
                self.final_error = error
                break
            events = agent_loop_continue(self.agent_ctx, self.loop_config(), self.signal)

    async def consume(self, events: Any) -> AgentEndEvent:
        """Drain one loop's events (publishing and handling each); returns its ``agent_end``."""
        end = AgentEndEvent(reason="error", error="the agent loop ended without agent_end")
        async for event in events:
            if not isinstance(event, MessageUpdateEvent):  # deltas are published as reply/reasoning deltas
                self.publish(event)
            self.handle(event)
            if isinstance(event, AgentEndEvent):
                end = event
        self.end = end
        return end

    # ------------------------------------------------------------------ loop hooks

    async def transform(self, messages: list[LoopMessage], signal: AbortSignal) -> list[LoopMessage]:
        """Before every model call: proactive compaction if due, then the repaired, capped payload."""
        conversation = _llm(messages)
        await self.window.maybe_compact(conversation, self.signal)
        return self.window.payload(conversation)  # type: ignore[return-value]  # a fresh list each call

    def take_steering(self) -> list[LoopMessage]:
        """Steering messages queued since the last safe point (one, or every pending ``all`` steer)."""
        return list(self.steering.take())

    def take_follow_ups(self) -> list[LoopMessage]:
        """Polled when the loop would stop; a steer that came after the last safe point becomes a follow-up."""
        return self.take_steering()

    def after_tool_call(self, hook: AfterToolCallContext, signal: AbortSignal) -> AgentToolResult:
        """Cap each new tool result at ``max_tool_result_chars`` (what the model and the ledger get)."""
        return truncate_result(hook.result, self.limits.max_tool_result_chars)

    def steer(self, message: str | UserMessage, *, id: str | None = None, mode: SteerMode = "all") -> SteerReceipt:
        """Offer ``message`` for the next safe point; the receipt ends ``delivered`` or ``returned``."""
        from nexus.engine.types import new_id

        user = message if isinstance(message, UserMessage) else UserMessage(message)
        receipt = SteerReceipt(id or new_id(), user, mode)
        if self.signal.aborted:
            self.steering.close(f"the run was aborted: {self.signal.reason or 'aborted'}")
        elif self.window.compacting:
            return self.steering.offer(receipt, refuse="the run is compacting its history")
        return self.steering.offer(receipt)

    def _steer_settled(self, receipt: SteerReceipt) -> None:
        """A receipt settled: remember a delivered one for the turn write, and announce it on the channel."""
        if receipt.status == "delivered":
            self.delivered_steer_ids.append(receipt.id)
        self.publish(SteerEvent(receipt))

    def close_steering(self) -> None:
        """The run is over: every steer not yet injected is returned (listed in the result)."""
        if self.signal.aborted:
            reason = f"the run was aborted before it could inject the message: {self.signal.reason or 'aborted'}"
        else:
            reason = "the run ended before it reached a point where it could inject the message"
        self.returned.extend(self.steering.close(reason))

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
            self.calls[event.tool_call_id] = ToolCallRecord(
                call_id=event.tool_call_id,
                tool_name=event.tool_name,
                arguments=dict(event.args),
                status="running",
                started_at=now_ms(),
                sequence=len(self.calls),
            )

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
        record = self.calls.get(result.tool_call_id)
        if record is None:  # a result the loop made without a start event (should not happen)
            record = ToolCallRecord(
                call_id=result.tool_call_id, tool_name=result.tool_name, started_at=now_ms(), sequence=len(self.calls)
            )
            self.calls[result.tool_call_id] = record
        record.status = "failed" if result.is_error else "completed"
        record.completed_at = result.timestamp
        record.result = result
        record.error = result.text if result.is_error else None
        record.spawned_session_label = spawned_label(result)
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
        response = _llm(self.agent_ctx.messages[self.history_len + 1 :])
        turn = [self.ctx.current_message, *response]
        stop_reason, error = self.outcome(response)
        turn_id = self.turn_id or ""
        return AgentResult(
            messages=[StoredMessage(i, turn_id, i, m.role, m) for i, m in enumerate(turn)],
            tool_calls=sorted(self.calls.values(), key=lambda c: c.sequence),
            usage=self.usage,
            stop_reason=stop_reason,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            error=error,
            compactions=self.compaction_records(),
            last_call_usage=self.last_call_usage,
            returned_steers=list(self.returned),
            turn_id=self.turn_id,
        )

    def compaction_records(self) -> list[CompactionRecord]:
        """Every compaction of the run as a ledger record, with the turn ids it summarised and kept."""
        done = self.window.compactions
        if not done:
            return []
        turn_id = self.turn_id or ""
        owners: list[str] = []
        if self.ledger is not None and self.turn_id is not None:
            owners = history_turn_ids(self.ledger, self.ctx.session_label, self.ctx.history)
        records = []
        for compaction, cut in done:
            record = compaction_record(compaction, cut=cut, turn_id=turn_id, owners=owners)
            record.turn_id = turn_id
            records.append(record)
        return records

    def outcome(self, response: list[Message]) -> tuple[RunStopReason, AgentError | None]:
        """Seed 000's stop reason (and error) from how the loop ended."""
        last = next((m for m in reversed(response) if isinstance(m, AssistantMessage)), None)
        if self.timed_out:
            text = (
                f"The run exceeded its timeout of {self.ctx.timeout_ms} ms and was stopped; the partial output was "
                "kept. Raise timeout_ms or split the task."
            )
            return "timeout", AgentError("timeout", text, retryable=True)
        if self.final_error is not None:
            return "error", self.final_error
        end = self.end
        if self.signal.aborted or (end is not None and end.reason == "aborted"):
            return "aborted", None
        if end is None or end.reason == "error":
            if last is not None and last.stop_reason == "error" and last.error_kind is not None:
                return "error", agent_error_from_message(last)
            text = (end.error if end is not None else None) or "the run failed"
            return "error", AgentError("unknown" if last is None or last.error_kind is None else "model_error", text)
        if end.reason == "max_iterations":
            return "tool_use", None
        if last is not None and last.stop_reason == "length":
            return "max_tokens", None
        return ("tool_use" if last is not None and last.stop_reason == "tool_use" else "end_turn"), None

    def persist(self, result: AgentResult) -> None:
        """Close the opened turn with the result (one transaction); then the result's messages are the ledger's."""
        if self.journal is not None:
            self.journal.close()
        if self.ledger is None or self.turn_id is None:
            return
        response = _llm(self.agent_ctx.messages[self.history_len + 1 :])
        write_result(self.ledger, self.ctx, self.turn_id, result, response, result.compaction, self.delivered_steer_ids)
        result.messages = self.ledger.messages(self.turn_id)


def assembly_metadata(ctx: AssembledContext) -> dict[str, object]:
    """What the model was told besides the prompt text, for the query message's ``context_json`` (audit)."""
    budget = ctx.token_budget
    return {
        "model": f"{ctx.provider}/{ctx.model}",
        "history_messages": len(ctx.history),
        "tools": [t.name for t in ctx.tools],
        "budget": {
            "context_window": budget.context_window,
            "system": budget.system,
            "history": budget.history,
            "current": budget.current,
            "tools": budget.tools,
            "reserve_output": budget.reserve_output,
            "reserve_compaction": budget.reserve_compaction,
        },
        "thinking": ctx.thinking_config.level if ctx.thinking_config is not None else "off",
        "max_response_tokens": ctx.max_response_tokens,
        "timeout_ms": ctx.timeout_ms,
    }


def _llm(messages: list[Any]) -> list[Message]:
    """The conversation as ``nexus.llm`` messages (the engine adds no custom message kinds)."""
    return [m for m in messages if isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage))]


def _is_overflow(end: AgentEndEvent, last: object) -> bool:
    """The loop ended because the prompt did not fit, before any output: recoverable by compaction."""
    return (
        end.reason == "error"
        and isinstance(last, AssistantMessage)
        and last.error_kind == "context_overflow"
        and not any(getattr(b, "text", "") or getattr(b, "name", "") for b in last.content)
    )


def options_for(ctx: AssembledContext, base: StreamOptions | None) -> StreamOptions:
    """The per-call options of a run: the caller's template plus the context's sampling settings."""
    options = base or StreamOptions()
    thinking = ctx.thinking_config.level if ctx.thinking_config is not None else options.thinking
    return replace(
        options,
        temperature=ctx.temperature if ctx.temperature is not None else options.temperature,
        max_tokens=ctx.max_response_tokens or options.max_tokens,
        thinking=thinking,
        session_id=options.session_id or ctx.session_label,
    )
