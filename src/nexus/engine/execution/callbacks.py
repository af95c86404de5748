"""The engine's streaming callbacks (seed 000): a mapping over the run's one event channel.

Streaming and persistence are separate: these callbacks fire *during* a run so a UI, a
channel adapter or the streaming bridge can show tokens, tool status and lifecycle phases
as they happen; the ledger is written from the final result. A callback that raises must
never break the run, so every call goes through :func:`safe_call`, which logs and moves on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.engine.execution.events import ExecutionEvent
from nexus.engine.types import EngineEvent

log = logging.getLogger("nexus.engine")

AgentPhase: TypeAlias = Literal["start", "streaming", "tool_use", "compaction_start", "compaction_end", "end"]
"""Lifecycle phases reported through ``on_agent_event`` (seed 000)."""

ToolState: TypeAlias = Literal["started", "completed", "failed"]
"""Tool states reported through ``on_tool_result``."""


@dataclass(slots=True)
class EngineCallbacks:
    """What a caller wants to hear while a run streams; every field is optional.

    - ``on_partial_reply(text)``: each piece of reply text as it arrives (a delta, not the
      whole text so far).
    - ``on_reasoning_stream(text)``: each piece of extended-thinking text.
    - ``on_tool_result(tool_call_id, tool_name, status, summary)``: ``started`` when a tool
      call begins, ``completed`` or ``failed`` when it ends (``summary`` = the start of its
      output, at most 200 characters).
    - ``on_agent_event(phase, timestamp_ms)``: ``start``, ``streaming`` (a model call
      began), ``tool_use``, ``compaction_start``, ``compaction_end``, ``end``.
    - ``on_engine_event(event)``: retries, waits for cooling auth profiles, model fallback
      and compaction details (:data:`~nexus.engine.types.EngineEvent`).

    Callbacks are plain functions called on the event loop; keep them quick. If one raises,
    the error is logged (logger ``nexus.engine``) and the run continues. A callback that
    needs the run to stop (its output went away: a closed pipe) aborts the run's
    ``AbortSignal`` instead of raising, so the turn ends ``aborted`` with what was produced.
    """

    on_partial_reply: Callable[[str], object] | None = None
    on_reasoning_stream: Callable[[str], object] | None = None
    on_tool_result: Callable[[str, str, ToolState, str | None], object] | None = None
    on_agent_event: Callable[[AgentPhase, int], object] | None = None
    on_engine_event: Callable[[EngineEvent], object] | None = None


def safe_call(name: str, fn: Callable[..., object] | None, *args: object) -> None:
    """Call ``fn(*args)`` if set; an exception is logged with the callback's ``name`` and swallowed."""
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:  # a broken UI callback must not break the run
        log.exception("engine callback %s raised; the run continues", name)


_SUMMARY_CHARS = 200


def callbacks_listener(callbacks: EngineCallbacks) -> Callable[[ExecutionEvent], None]:
    """The seed-000 callbacks as a listener of a run's event channel (a thin mapping, nothing more).

    Phases: ``start`` (run_start), ``streaming`` (a model call begins), ``tool_use`` (a tool
    call begins), ``compaction_start``/``compaction_end``, ``end`` (run_end).
    """
    from nexus.agent import MessageStartEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
    from nexus.llm import AssistantMessage, now_ms

    def phase(name: AgentPhase) -> None:
        safe_call("on_agent_event", callbacks.on_agent_event, name, now_ms())

    def listener(item: ExecutionEvent) -> None:
        event = item.event
        kind = event.type
        if kind == "reply_delta":
            safe_call("on_partial_reply", callbacks.on_partial_reply, event.delta)
        elif kind == "reasoning_delta":
            safe_call("on_reasoning_stream", callbacks.on_reasoning_stream, event.delta)
        elif isinstance(event, MessageStartEvent):
            if isinstance(event.message, AssistantMessage):
                phase("streaming")
        elif isinstance(event, ToolExecutionStartEvent):
            phase("tool_use")
            safe_call("on_tool_result", callbacks.on_tool_result, event.tool_call_id, event.tool_name, "started", None)
        elif isinstance(event, ToolExecutionEndEvent):
            text = "".join(getattr(b, "text", "") for b in event.result.content)
            status: ToolState = "failed" if event.is_error else "completed"
            summary = text[:_SUMMARY_CHARS] or None
            safe_call("on_tool_result", callbacks.on_tool_result, event.tool_call_id, event.tool_name, status, summary)
        elif kind in ("retry", "wait", "fallback", "compaction_start", "compaction_end"):
            if kind == "compaction_start":
                phase("compaction_start")
            elif kind == "compaction_end":
                phase("compaction_end")
            safe_call("on_engine_event", callbacks.on_engine_event, event)
        elif kind == "run_start":
            phase("start")
        elif kind == "run_end":
            phase("end")

    return listener
