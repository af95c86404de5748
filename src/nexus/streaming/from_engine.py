"""A run's seed-004 ``StreamEvent``\\ s: one function over ``execution.subscribe()``.

``stream_events(execution, target)`` subscribes to the run's one event channel at the call (so a
caller handed the execution before it runs sees everything) and maps it:

- ``run_start`` → ``stream_start{runId, sessionLabel, target}`` (the run's own id);
- reply / reasoning deltas → ``token`` / ``reasoning``;
- a tool call's start and end → ``tool_status`` with a human summary (:mod:`.tool_status`);
- a model call that ends in tool calls → ``stream_end{final:false}``, and so does a reply that
  ended without them when another model call follows (a steer that came while it streamed is
  answered in the same run: the adapter closes that reply's message, the answer gets its own);
- ``run_end`` (the turn is written) → ``stream_end{final:true}``, or ``stream_error{error, partial}``
  when the run failed, was aborted or stopped at its iteration limit (``partial``: reply text had
  already gone out). A run that never began (aborted while it waited for its session) ends the
  same way, with nothing before it.

The broker's deliverer, the server's live event log and ``nexus send --wait`` all read runs
through it; the CLI renders the channel itself.

A run whose ``execution.events_shown`` says False (the broker's session lease is past its expiry and not
yet renewed: the process was paused, say, and another may have taken the session over) has its events
held back here, not shown: they go out once it says True again or the run's turn is written, and are
dropped when that write fails (the lease was lost: the new holder runs the message again). The terminal
event always goes out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from nexus.llm import ToolCall
from nexus.streaming.events import (
    Reasoning,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    Token,
    ToolStatus,
    is_terminal,
)
from nexus.streaming.tool_status import summary

if TYPE_CHECKING:
    from nexus.adapters import DeliveryTarget
    from nexus.engine import AgentResult, Execution, Subscription

__all__ = ["stream_events"]


def stream_events(
    execution: Execution, target: DeliveryTarget, subscription: Subscription | None = None
) -> AsyncIterator[StreamEvent]:
    """The StreamEvents of ``execution`` for ``target``: from now on (subscribed at the call), or from
    ``subscription`` (one made earlier, e.g. as a broker receipt was handed the run)."""
    events = subscription if subscription is not None else execution.subscribe()
    return _stream(events, execution, target)


async def _stream(
    subscription: Subscription, execution: Execution, target: DeliveryTarget
) -> AsyncIterator[StreamEvent]:
    """The mapped events, as far as ``execution.events_shown`` lets them out (see the module docstring)."""
    mapper = _Mapper(execution.run_id, execution.session_label, target)
    held: list[StreamEvent] = []
    async for item in subscription:
        engine_event = item.event
        if engine_event.type == "reply_delta":  # most events: mapped here, without a call
            if not engine_event.delta:
                continue
            mapper.text_seen = True
            event: StreamEvent = Token(engine_event.delta)
        else:
            mapped = mapper.map(engine_event)
            if mapped is None:
                continue
            event = mapped
        shown = execution.events_shown
        if shown is not None and not shown():
            if not is_terminal(event):
                held.append(event)
                continue
            if held and await _write_failed(execution):  # the ledger's verdict: a refused write drops them
                held.clear()
        if held:
            for earlier in held:
                yield earlier
            held.clear()
        yield event
        if mapper.ended:
            return
    yield StreamError("the run ended without an end event", mapper.text_seen)


async def _write_failed(execution: Execution) -> bool:
    """True when the run's end came from a turn write that failed (e.g. refused: the lease was lost)."""
    outcome = execution.result
    await asyncio.wait({outcome})  # it settles right after the run's end event
    return outcome.cancelled() or outcome.exception() is not None


class _Mapper:
    """One run's engine events to StreamEvents (the rules in the module docstring); ``None``: nothing to show."""

    __slots__ = ("ended", "reply_open", "run_id", "session_label", "target", "text_seen", "tools")

    def __init__(self, run_id: str, session_label: str, target: DeliveryTarget) -> None:
        self.run_id, self.session_label, self.target = run_id, session_label, target
        self.text_seen = self.reply_open = self.ended = False
        self.tools = _ToolCalls()

    def map(self, event: Any) -> StreamEvent | None:
        kind = event.type  # reply deltas never come here: the stream maps them itself (most of a run's events)
        if kind == "reasoning_delta":
            if event.delta:
                return Reasoning(event.delta)
        elif kind in ("tool_execution_start", "tool_execution_end"):
            return self.tools.status(event)
        elif kind == "turn_end":
            self.reply_open = not (
                event.tool_results or any(type(block) is ToolCall for block in event.message.content)
            )
            if not self.reply_open:
                return StreamEnd(self.run_id, final=False)
        elif kind == "turn_start" and self.reply_open:  # the run goes on after a reply (a steer came)
            self.reply_open = False
            return StreamEnd(self.run_id, final=False)
        elif kind == "run_start":
            return StreamStart(self.run_id, self.session_label, self.target)
        elif kind == "run_end":
            self.ended = True
            return _end(event.result, self.run_id, self.text_seen)
        return None


class _ToolCalls:
    """A run's tool calls between their start and end (the end's summary names what the start asked)."""

    __slots__ = ("args",)

    def __init__(self) -> None:
        self.args: dict[str, dict[str, Any]] = {}

    def status(self, event: Any) -> ToolStatus:
        """A tool call's start or end (an agent-loop event) as its ``tool_status``."""
        if event.type == "tool_execution_start":
            self.args[event.tool_call_id] = dict(event.args)
            line = summary(event.tool_name, event.args, done=False)
            return ToolStatus(event.tool_name, event.tool_call_id, "started", line)
        args = self.args.pop(event.tool_call_id, {})
        failed = event.is_error or event.result.is_error
        line = summary(event.tool_name, args, done=True, details=event.result.details, failed=failed)
        return ToolStatus(event.tool_name, event.tool_call_id, "failed" if failed else "completed", line)


def _end(result: AgentResult, run_id: str, text_seen: bool) -> StreamEvent:
    """The terminal event of a written run."""
    error = result.error.message if result.error is not None else None
    if result.status == "completed":
        if result.stop_reason != "tool_use":
            return StreamEnd(run_id, final=True)
        return StreamError(error or "the run stopped at its iteration limit", text_seen)
    if result.status == "aborted":
        return StreamError(error or "the run was aborted", text_seen)
    return StreamError(error or "the run failed", text_seen)
