"""The CLI's side of one engine run: its event channel into a renderer, and the summary of its result."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

from nexus.cli._render import Renderer, RunStart, RunSummary, describe_engine_event

if TYPE_CHECKING:
    from nexus.engine import AgentResult, EngineEvent, Execution, ExecutionEvent
    from nexus.ledger import Ledger

_COMPACTION_NOTICE_DELAY_S = 0.3


class RenderBridge:
    """The execution's one event channel → renderer calls (:meth:`on_event` is the only listener).

    ``existed`` says whether the session was there before the run (``session_created`` is then
    false); ``model`` is the ref the user chose, as the renderer shows it.
    """

    def __init__(self, renderer: Renderer, ledger: Ledger, model: str, existed: bool) -> None:
        self.renderer = renderer
        self.ledger = ledger
        self.model = model
        self.existed = existed
        self.created = False
        self.started = False
        self._held: EngineEvent | None = None
        self._held_timer: asyncio.TimerHandle | None = None

    def start(self, run_id: str, session_label: str, parent_turn_id: str | None) -> None:
        """The run began (after the session's lock and the assembly): ``stream_start``."""
        if not self.started:
            self.started = True
            self.created = not self.existed and parent_turn_id is None
            self.renderer.start(RunStart(run_id, session_label, self.model, self.created))

    def recovered(self, turn_ids: tuple[str, ...], rescued: tuple[str, ...]) -> None:
        """Open turns were closed before the run read its head: this process's own (kept in rescue files
        when their final write failed) and those of killed processes."""
        for turn_id in rescued:
            print(f"nexus: turn {turn_id}, not saved earlier, is in the ledger now", file=sys.stderr, flush=True)
        others = [turn_id for turn_id in turn_ids if turn_id not in rescued]
        if others:
            from nexus.cli._errors import recovered_notice

            notice = self.ledger.run_here(lambda here: recovered_notice(here, others))  # a CLI: a short wait is fine
            print(notice, file=sys.stderr, flush=True)

    def on_engine_event(self, event: EngineEvent) -> None:
        """Notices for retries, waits, fallbacks and compactions.

        A compaction start is shown after a short delay: a check that finds nothing old enough
        to summarise ends at once, and is then not worth two lines of noise.
        """
        if event.type == "compaction_start":
            self._flush_held()
            self._held = event
            self._held_timer = asyncio.get_running_loop().call_later(_COMPACTION_NOTICE_DELAY_S, self._flush_held)
            return
        if event.type == "compaction_end" and self._held is not None and event.result is None:
            self._drop_held()
            if event.error and "nothing old enough" in event.error:
                return
        self._flush_held()
        self.renderer.notice(*describe_engine_event(event))

    def close(self, execution: Execution) -> None:
        """The run is over: a compaction notice still held back is no longer news; a run that got past its
        start but failed before its turn opened still gets its ``stream_start``."""
        self._drop_held()
        if execution.started and not self.started:
            self.start(execution.run_id, execution.session_label, None)

    def _flush_held(self) -> None:
        held = self._held
        self._drop_held()
        if held is not None:
            self.renderer.notice(*describe_engine_event(held))

    def _drop_held(self) -> None:
        if self._held_timer is not None:
            self._held_timer.cancel()
        self._held, self._held_timer = None, None

    def on_event(self, item: ExecutionEvent) -> None:
        """One event of the run: reply/reasoning text, model calls, tool starts/ends, engine notices."""
        event, kind = item.event, item.type
        if kind == "run_start":
            self.start(item.run_id, item.session_label, event.parent_turn_id)
        elif kind == "lock_wait":
            print(f"nexus: waiting for another run of session {item.session_label} to finish…", file=sys.stderr,
                  flush=True)  # fmt: skip
        elif kind == "recovered":
            self.recovered(event.turn_ids, event.rescued)
        elif kind == "reply_delta":
            self.renderer.text(event.delta)
        elif kind == "reasoning_delta":
            self.renderer.reasoning(event.delta)
        elif kind == "message_start" and event.message.role == "assistant":
            self.renderer.message_end()  # a new model call: its text starts on a fresh line
        elif kind in ("retry", "wait", "fallback", "compaction_start", "compaction_end"):
            self.on_engine_event(event)
        elif kind == "tool_execution_start":
            self.renderer.message_end()
            self.renderer.tool_start(event.tool_call_id, event.tool_name, event.args)
        elif kind == "tool_execution_end":
            self.renderer.tool_end(
                event.tool_call_id,
                event.tool_name,
                event.result,
                event.is_error,
            )


def summarize_run(result: AgentResult, execution: Execution, model: str, created: bool, started: float) -> RunSummary:
    """What the renderer and ``--json`` report of a finished run: reply text, status, usage, cost, timing."""
    text = result.reply
    usage = result.usage
    return RunSummary(
        run_id=execution.run_id,
        session_label=execution.session_label,
        status=result.status,
        stop_reason=result.stop_reason,
        turn_id=result.turn_id,
        model=model,
        text=text,
        error=result.error.message if result.error else None,
        error_kind=result.error.kind if result.error else None,
        usage={
            "input": usage.input,
            "output": usage.output,
            "cacheRead": usage.cache_read,
            "cacheWrite": usage.cache_write,
            "reasoning": usage.reasoning,
            "total": usage.total,
        },
        usage_estimated=usage.estimated,
        cost=round(usage.cost.total, 6),
        duration_ms=result.duration_ms or int((time.monotonic() - started) * 1000),
        session_created=created,
        tool_calls=len(result.tool_calls),
    )
