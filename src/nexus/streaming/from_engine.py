"""Today's engine events → StreamEvents: the one place that knows both vocabularies.

The engine's typed event channel (issue 9: ``Runtime``/``Execution`` with an envelope) is
being rewritten; until it lands this maps what ``EngineExecution.events()`` yields now
(the agent loop's events plus engine notices). Only :func:`stream_events` is public, so
re-pointing it at the new channel touches this module alone.

Mapping: ``agent_start`` → ``stream_start``; text / thinking deltas → ``token`` /
``reasoning``; tool execution start / end → ``tool_status`` with a human summary; a turn
whose assistant message ends in tool calls → ``stream_end{final:false}``, and so does a reply
that ended without them when another model call follows (a steer that came while it streamed
is answered in the same run: the adapter closes that reply's message, the answer gets its
own instead of being glued to it); ``agent_end`` →
``stream_end{final:true}``, or ``stream_error`` when the run failed or was aborted
(``partial`` when reply text had already been emitted).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from nexus.adapters.types import DeliveryTarget
from nexus.agent.events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from nexus.engine.execution.events import ExecutionEvent, ReasoningDelta, ReplyDelta
from nexus.llm.events import TextDeltaEvent, ThinkingDeltaEvent
from nexus.llm.types import ToolCall
from nexus.streaming.events import Reasoning, StreamEnd, StreamError, StreamEvent, StreamStart, Token, ToolStatus
from nexus.streaming.tool_status import summary

if TYPE_CHECKING:
    from nexus.engine.execution.execute import EngineExecution


class EngineEventMapper:
    """Stateful translation of one run's engine events (remembers tool arguments and whether text went out)."""

    def __init__(self, run_id: str, session_label: str, target: DeliveryTarget) -> None:
        self.run_id = run_id
        self.session_label = session_label
        self.target = target
        self.text_seen = False
        self.ended = False
        self._args: dict[str, dict[str, Any]] = {}
        self._reply_open = False
        """A model call ended in text alone: closed by ``stream_end{final:false}`` if another call follows."""

    def map(self, event: object) -> list[StreamEvent]:
        """The StreamEvents for one engine event (often none); an envelope is unwrapped first."""
        if type(event) is ExecutionEvent:
            event = event.event
        kind = type(event)
        if kind is ReplyDelta:
            if event.delta:  # type: ignore[attr-defined]
                self.text_seen = True
                return [Token(event.delta)]  # type: ignore[attr-defined]
            return []
        if kind is ReasoningDelta:
            return [Reasoning(event.delta)] if event.delta else []  # type: ignore[attr-defined]
        if kind is MessageUpdateEvent:
            inner = event.assistant_event  # type: ignore[attr-defined]
            if type(inner) is TextDeltaEvent and inner.delta:
                self.text_seen = True
                return [Token(inner.delta)]
            if type(inner) is ThinkingDeltaEvent and inner.delta:
                return [Reasoning(inner.delta)]
            return []
        if kind is ToolExecutionStartEvent:
            return [self._tool_start(event)]  # type: ignore[arg-type]
        if kind is ToolExecutionEndEvent:
            return [self._tool_end(event)]  # type: ignore[arg-type]
        if kind is TurnEndEvent:
            turn: TurnEndEvent = event  # type: ignore[assignment]
            calls = any(type(block) is ToolCall for block in turn.message.content)
            self._reply_open = not (calls or turn.tool_results)
            return [] if self._reply_open else [StreamEnd(self.run_id, final=False)]
        if kind is TurnStartEvent and self._reply_open:  # the run goes on after a reply (a steer came)
            self._reply_open = False
            return [StreamEnd(self.run_id, final=False)]
        if kind is AgentStartEvent:
            return [StreamStart(self.run_id, self.session_label, self.target)]
        if kind is AgentEndEvent:
            return self._end(event)  # type: ignore[arg-type]
        return []

    def _tool_start(self, event: ToolExecutionStartEvent) -> ToolStatus:
        self._args[event.tool_call_id] = dict(event.args)
        line = summary(event.tool_name, event.args, done=False)
        return ToolStatus(event.tool_name, event.tool_call_id, "started", line)

    def _tool_end(self, event: ToolExecutionEndEvent) -> ToolStatus:
        args = self._args.pop(event.tool_call_id, {})
        failed = event.is_error or event.result.is_error
        line = summary(event.tool_name, args, done=True, details=event.result.details, failed=failed)
        return ToolStatus(event.tool_name, event.tool_call_id, "failed" if failed else "completed", line)

    def _end(self, event: AgentEndEvent) -> list[StreamEvent]:
        self.ended = True
        if event.reason == "stop":
            return [StreamEnd(self.run_id, final=True)]
        if event.reason == "aborted":
            return [StreamError(event.error or "the run was aborted", self.text_seen)]
        if event.reason == "max_iterations":
            return [StreamError(event.error or "the run stopped at its iteration limit", self.text_seen)]
        return [StreamError(event.error or "the run failed", self.text_seen)]


async def stream_events(
    engine_events: AsyncIterable[object],
    *,
    run_id: str,
    session_label: str,
    target: DeliveryTarget,
) -> AsyncIterator[StreamEvent]:
    """StreamEvents for one run, from its engine event iterator (``EngineExecution.events()``)."""
    mapper = EngineEventMapper(run_id, session_label, target)
    async for event in engine_events:
        for mapped in mapper.map(event):
            yield mapped
    if not mapper.ended:
        yield StreamError("the run ended without an end event", mapper.text_seen)


def execution_events(execution: EngineExecution, target: DeliveryTarget) -> AsyncIterator[StreamEvent]:
    """StreamEvents of a running execution, subscribed *now* (so no early event is missed).

    ``EngineExecution.events()`` subscribes only when iteration starts; a router that first
    looks up its adapter would lose the run's first tokens. This subscribes at the call.
    """
    subscription = execution.subscribe()  # bounded: deltas coalesce, lifecycle events are never dropped
    return stream_events(subscription, run_id=execution.run_id, session_label=execution.session_label, target=target)
