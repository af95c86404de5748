"""The engine's streaming callbacks (seed 000) and the safe way to call them.

Streaming and persistence are separate: these callbacks fire *during* a run so a UI, a
channel adapter or the streaming bridge can show tokens, tool status and lifecycle phases
as they happen; the ledger is written from the final result. A callback that raises must
never break the run, so every call goes through :func:`safe_call`, which logs and moves on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from nexus.engine.types import EngineEvent

log = logging.getLogger("nexus.engine")

AgentPhase: TypeAlias = Literal["start", "streaming", "tool_use", "compaction_start", "compaction_end", "end"]
"""Lifecycle phases reported through ``on_agent_event`` (seed 000)."""

ToolStatus: TypeAlias = Literal["started", "completed", "failed"]
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
    on_tool_result: Callable[[str, str, ToolStatus, str | None], object] | None = None
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
