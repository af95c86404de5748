"""Opening a run's turn: the first row of its crash journal, written before the model is called.

The turn is stored with its query, status ``streaming`` and the session pointer not moved, so a
crash at any later point leaves a turn that ``Ledger.recover`` closes. Its query message carries what the
model was told besides the prompt text (:func:`assembly_metadata`), for audits.

:func:`open_run_turn` is a run's step that does it: a cancellation meanwhile writes the opened turn
``aborted``; any other failure (a ledger error, ``LeaseLostError`` from the lease fence) is raised, and
the run's execution announces its end with that error (``_run_end``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from nexus.engine.execution._writer import off_loop
from nexus.engine.types import AgentResult, AssembledContext
from nexus.ledger import TurnDetails, TurnOpen

if TYPE_CHECKING:
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal


class OpeningRun(Protocol):
    """What opening a turn needs of its run (an ``EngineRun``, which imports this module)."""

    ctx: AssembledContext
    turn_id: str | None
    signal: AbortSignal

    def close_steering(self) -> None: ...
    def build_result(self) -> AgentResult: ...
    def persist(self, result: AgentResult) -> None: ...
    def finish(self, result: AgentResult) -> None: ...


async def open_run_turn(run: OpeningRun, ledger: Ledger) -> None:
    """Open ``run``'s turn in ``ledger`` (off the event loop when the ledger needs it) and set ``run.turn_id``.

    The id is set on the writer thread as soon as the turn is stored: a task cancelled meanwhile must still
    close it. Cancelled: that turn (if it opened) is written ``aborted`` and the run announces its end.
    """

    def opened() -> None:
        run.turn_id = open_turn(ledger, run.ctx)

    try:
        await off_loop(opened, inline=ledger.inline)
    except asyncio.CancelledError:
        if run.turn_id is not None:
            _close_cancelled(run)
        raise


def _close_cancelled(run: OpeningRun) -> None:
    """The task was cancelled while ``run``'s turn was being opened: write that turn ``aborted``, end the run."""
    run.signal.abort("the run's task was cancelled")
    run.close_steering()
    result = run.build_result()
    try:
        run.persist(result)
    finally:
        run.finish(result)


def open_turn(ledger: Ledger, ctx: AssembledContext) -> str:
    """Open the turn of a run of ``ctx`` in ``ledger`` and return its id (``HeadMovedError``: the context is stale).

    Synchronous: it runs on the engine's ledger writer thread (or inline on SQLite, see ``_writer``).
    """
    details = TurnDetails(
        model=ctx.model,
        provider=ctx.provider,
        role=ctx.role,
        run_id=ctx.run_id,
        toolset_name=ctx.toolset_name,
        tools_available=[t.name for t in ctx.tools],
        permissions_granted=list(ctx.permissions_granted),
        source_event_id=ctx.source_event_id,
        workspace_path=ctx.workspace_path or None,
    )
    opening = TurnOpen(
        ctx.session_label,
        [ctx.current_message],
        details,
        ctx.parent_turn_id,
        ctx.source,
        assembly_metadata(ctx),
        ctx.system_prompt,
        ctx.queue_item_ids,  # fenced as the final write is: a run that lost its lease opens no turn
        ctx.lease_fence,
    )
    return ledger.run_here(lambda here: here.turns.open(opening))


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
