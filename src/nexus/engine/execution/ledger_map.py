"""``AgentResult`` → Agents Ledger rows (seed 000 "AgentResult → Ledger Writes").

The engine works on messages; the ledger works on turns. This module is the one place that
translates: run status from the stop reason, tool-call records with timings and
``spawned_session_label``, usage, the error JSON, and a compaction's message cut into the
``first_kept_turn_id`` / ``summarized_through_turn_id`` the ``compactions`` table needs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from nexus.engine.types import AgentError, AgentResult, AssembledContext
from nexus.ledger import USAGE_ESTIMATED_KEY, HeadMovedError, TurnDetails, TurnWrite
from nexus.llm import AssistantMessage, Message, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from nexus.ledger import CompactionRecord, Ledger, StoredMessage, Turn

log = logging.getLogger("nexus.engine")


def error_json(error: AgentError | None) -> dict[str, object] | None:
    """The ``error`` column: ``{kind, message, retryable}`` or ``None``."""
    return None if error is None else asdict(error)


def turn_error(result: AgentResult, abort_reason: str | None) -> dict[str, object] | None:
    """The ``error`` column of the run's turn: the run's error; for an aborted run without one, why it was
    aborted (``{"kind": "aborted", "message": "interrupted by message …", "retryable": false}``).

    ``AgentResult.error`` stays ``None`` for an abort (the caller asked for it), but the turn is what
    ``GET /v1/turns/{id}``, ``nexus queue list`` and ``nexus send --wait`` read later, by which time the
    reason is otherwise only in the cut assistant message.
    """
    if result.error is not None or result.status != "aborted":
        return error_json(result.error)
    return {"kind": "aborted", "message": abort_reason or "aborted", "retryable": False}


def turn_metadata(result: AgentResult) -> dict[str, object] | None:
    """The turn's ``metadata`` column: marks estimated usage (no schema column holds that), else None."""
    return {USAGE_ESTIMATED_KEY: True} if result.usage.estimated else None


def spawned_label(result: ToolResultMessage) -> str | None:
    """The worker session a ``spawn_agent`` result names (``details['spawned_session_label']``)."""
    details = result.details or {}
    value = details.get("spawned_session_label")
    return value if isinstance(value, str) else None


async def history_turn_ids(ledger: Ledger, session_label: str, history: Sequence[Message]) -> list[str]:
    """The turn each message of ``history`` (as ``ledger.turns.history`` returned it) belongs to.

    A leading compaction summary maps to ``""``. Computed from the turns' message counts,
    walking back from the head over the newest turns only (a turn holds at least one message,
    so as many turns as messages cover the history; only done when a run compacts). ``history``
    may be a window: its messages are still the newest whole turns.
    """
    offset = 1 if history and _is_summary(history[0]) else 0
    wanted = len(history) - offset
    owners, covered = _owners(await ledger.turns.path(session_label, limit=wanted), len(history), offset)
    if not covered:  # turns without messages (bare compactions) were among the newest: walk them all
        owners, _ = _owners(await ledger.turns.path(session_label), len(history), offset)
    return owners


def _owners(turns: Sequence[Turn], size: int, offset: int) -> tuple[list[str], bool]:
    """Owners of the ``size`` history messages from ``turns`` (root first), and whether they covered all."""
    owners = [""] * size
    index = size
    for turn in reversed(turns):
        if index <= offset:
            break
        count = min(turn.message_count, index - offset)
        owners[index - count : index] = [turn.id] * count
        index -= count
    return owners, index <= offset


def _is_summary(message: Message) -> bool:
    from nexus.engine.assembly._window import stored_summary

    return stored_summary([message]) is not None


def compaction_record(record: CompactionRecord, *, cut: int, turn_id: str, owners: Sequence[str]) -> CompactionRecord:
    """The ``compactions`` row of a compaction that kept the conversation from index ``cut`` on: ``record``
    with the turn ids it summarised and kept.

    ``owners`` maps history indices to turn ids (:func:`history_turn_ids`); indices past the
    history belong to this run's turn ``turn_id``. The ledger keeps whole turns, so the first
    kept turn is the one holding message ``cut`` (its earlier messages are kept too: more
    context, never less). ``None`` means only this turn is kept.
    """

    def owner(index: int) -> str:
        return owners[index] if 0 <= index < len(owners) and owners[index] else turn_id

    first_kept = owner(cut) if cut < len(owners) else None
    through = owner(cut - 1) if cut - 1 < len(owners) else turn_id
    if first_kept == turn_id:
        first_kept = None
    return replace(record, summarized_through_turn_id=through, first_kept_turn_id=first_kept)


def run_compactions(
    ledger: Ledger | None,
    ctx: AssembledContext,
    done: Sequence[tuple[CompactionRecord, int]],
    opened: str | None,
    owners: Sequence[str] | None,
) -> list[CompactionRecord]:
    """Every compaction of a run (``done``: each with the index its kept part starts at) as ``compactions``
    rows of the run's turn ``opened`` (``None`` when it wrote none: then no history is looked up), with the
    turn ids it summarised and kept. ``owners``: the turn of each history message, as the run read them
    (:func:`history_turn_ids`); ``None``, a cancelled run that cannot await: read here."""
    if not done:
        return []
    if owners is None and ledger is not None and opened is not None:
        label, history = ctx.session_label, ctx.history
        owners = ledger.run_here(lambda here: history_turn_ids(here, label, history))
    return compaction_records(done, opened or "", owners or [])


def compaction_records(
    done: Sequence[tuple[CompactionRecord, int]], turn_id: str, owners: Sequence[str]
) -> list[CompactionRecord]:
    """The ``compactions`` rows of a run's compactions (each with the index its kept part starts at)."""
    records = []
    for compaction, cut in done:
        record = compaction_record(compaction, cut=cut, turn_id=turn_id, owners=owners)
        record.turn_id = turn_id
        records.append(record)
    return records


def llm_messages(messages: Sequence[Any]) -> list[Message]:
    """The conversation as ``nexus.llm`` messages (the engine adds no custom message kinds)."""
    return [m for m in messages if isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage))]


def result_record(
    ctx: AssembledContext,
    turn_id: str,
    result: AgentResult,
    response: Sequence[Message],
    compaction: CompactionRecord | None,
    steer_ids: Sequence[str] = (),
    sources: Sequence[str | None] = (),
    abort_reason: str | None = None,
) -> TurnWrite:
    """The write that closes the opened turn with the run's outcome (:func:`write_result` writes it).

    The broker queue items the turn consumed — its batch (``ctx.queue_item_ids``) and the steers
    injected into it (``steer_ids``; ids that name no queue item are ignored) — are marked
    delivered in that same transaction. ``sources[i]`` is the ``source`` of response message ``i``
    when it is a steer. ``abort_reason``: why an aborted run was aborted (its turn's ``error``).
    """
    if compaction is not None:
        compaction.summarized_through_turn_id = compaction.summarized_through_turn_id or turn_id
    return TurnWrite(
        ctx.session_label,
        turn_id,
        response_messages=list(response),
        status=result.status,
        usage=result.usage,
        stop_reason=result.stop_reason,
        error=turn_error(result, abort_reason),
        compaction=compaction,
        tool_calls=result.tool_calls,
        response_sources=list(sources),
        consumed_queue_items=[*ctx.queue_item_ids, *steer_ids],
        lease_fence=ctx.lease_fence,
        details=TurnDetails(model=ctx.model, provider=ctx.provider, metadata=turn_metadata(result)),
    )


def write_result(ledger: Ledger, record: TurnWrite, run_id: str) -> str:
    """Close the opened turn (:func:`result_record`) in one transaction; returns the turn id.

    If another writer moved the session head meanwhile (the one-run-per-session rule was
    broken by the caller), the turn is kept as a side branch instead of being lost.
    """
    try:
        return ledger.run_here(lambda here: here.turns.write(record))
    except HeadMovedError:
        _moved(record, run_id)
        branch = replace(record, if_head_moved="branch")
        return ledger.run_here(lambda here: here.turns.write(branch))


async def write_result_grouped(ledger: Ledger, record: TurnWrite, run_id: str) -> list[StoredMessage]:
    """:func:`write_result` for a broker's turn on the event loop, then the turn's stored messages: the write joins
    the queue's next group commit (``SqlQueueStore.grouped``), one transaction with the accepts and claims of that
    loop round instead of one of its own (a commit's WAL frames, locks and system calls)."""
    grouped = ledger.queue.grouped
    try:
        turn_id = await ledger.turns.write(record, via=grouped)
    except HeadMovedError:
        _moved(record, run_id)
        turn_id = await ledger.turns.write(replace(record, if_head_moved="branch"), via=grouped)
    return await ledger.turns.messages(turn_id)


def _moved(record: TurnWrite, run_id: str) -> None:
    log.warning(
        "session %s moved during run %s; turn %s kept as a side branch", record.session_label, run_id, record.turn_id
    )
