"""Opening a run's turn: the first row of its crash journal, written before the model is called.

The turn is stored with its query, status ``streaming`` and the session pointer not moved, so a
crash at any later point leaves a turn that ``Ledger.recover`` closes. Its query message carries what the
model was told besides the prompt text (:func:`assembly_metadata`), for audits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.engine.types import AssembledContext
from nexus.ledger import TurnDetails, TurnOpen

if TYPE_CHECKING:
    from nexus.ledger import Ledger


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
