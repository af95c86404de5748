"""The CLI's side of one engine run: assemble, start, stream engine events into a renderer, summarise."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

from nexus.cli._render import Renderer, RunStart, RunSummary, describe_engine_event
from nexus.errors import NexusError

if TYPE_CHECKING:
    from nexus.cli.run_cmd import Runtime
    from nexus.engine import AgentResult
    from nexus.engine.execution.events import ExecutionEvent
    from nexus.engine.types import AssembledContext, EngineEvent
    from nexus.llm.abort import AbortSignal

_COMPACTION_NOTICE_DELAY_S = 0.3


class RenderBridge:
    """The execution's one event channel → renderer calls (:meth:`on_event` is the only listener)."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self._held: EngineEvent | None = None
        self._held_timer: asyncio.TimerHandle | None = None

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

    def close(self) -> None:
        """The run is over: a compaction notice still held back is no longer news."""
        self._drop_held()

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
        if kind == "reply_delta":
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


async def call_engine(
    runtime: Runtime, message: str, renderer: Renderer, abort: AbortSignal
) -> tuple[AgentResult, AssembledContext, str | None, bool]:
    """Assemble the context, start the execution, stream it into ``renderer``.

    Returns (result, context, turn id, whether this run started the session's conversation).
    """
    from nexus.engine.types import ThinkingConfig

    env = runtime.engine_env()
    bridge = RenderBridge(renderer)
    from nexus.engine.assembly.context import local_timezone
    from nexus.engine.execution.session_lock import run_lock
    from nexus.ledger import TurnNotSavedError

    chosen = env.model(runtime.model)
    env.preflight(chosen)
    runtime.note_thinking(chosen)
    existed = runtime.session_exists()
    label = runtime.ledger.ensure_session(runtime.session).label

    def waiting() -> None:
        print(f"nexus: waiting for another run of session {label} to finish…", file=sys.stderr, flush=True)

    def recovered(ids: list[str]) -> None:
        from nexus.cli._errors import recovered_notice

        mine = [i for i in ids if i in runtime.unsaved]
        for turn_id in mine:
            runtime.unsaved.remove(turn_id)
            print(f"nexus: turn {turn_id}, not saved earlier, is in the ledger now", file=sys.stderr, flush=True)
        others = [i for i in ids if i not in mine]
        if others:
            print(recovered_notice(runtime.ledger, others), file=sys.stderr, flush=True)

    # one run per session at a time, also across processes: a second `nexus run` waits, never forks
    # (and continues after the turn of a run it waited for, even a killed one: run_lock recovers it first;
    # a turn of this process whose final write failed is put in the ledger first too, from its rescue file)
    async with run_lock(
        runtime.ledger, label, signal=abort, on_wait=waiting, on_recovered=recovered, orphans=tuple(runtime.unsaved)
    ) as held:
        if not held:
            raise NexusError(f"interrupted while waiting for another run of session {label}; nothing was sent")
        created = not existed and runtime.ledger.head(label) is None  # (a run we waited for may have started it)
        await env.prepare_tools(label, "unified", None, abort)  # the MCP servers this run could use
        ctx = env.assemble(message, session=label, model=chosen, signal=abort, channel="cli", timezone=local_timezone())
        if runtime.thinking is not None:
            level = runtime.thinking
            ctx.thinking_config = ThinkingConfig(level) if level != "off" else None  # type: ignore[arg-type]
        renderer.start(RunStart(ctx.run_id, ctx.session_label, runtime.model, created))
        execution = env.start(ctx, model=chosen)  # the task starts at the next await: no event is missed
        execution.on_event(bridge.on_event)
        try:
            result = await execution.result
        except TurnNotSavedError:  # chat goes on: the next turn of the session puts this one in first
            if execution.turn_id is not None:
                runtime.unsaved.append(execution.turn_id)
            raise
        finally:
            bridge.close()
    return result, ctx, execution.turn_id, created


def summarize_run(
    runtime: Runtime, result: AgentResult, ctx: AssembledContext, turn_id: str | None, created: bool, started: float
) -> RunSummary:
    """What the renderer and ``--json`` report of a finished run: reply text, status, usage, cost, timing."""
    from nexus.engine.execution.ledger_map import turn_status

    text = result.reply
    usage = result.usage
    return RunSummary(
        run_id=ctx.run_id,
        session_label=ctx.session_label,
        status=turn_status(result),
        stop_reason=result.stop_reason,
        turn_id=turn_id,
        model=runtime.model,
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
