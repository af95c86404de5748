"""A turn's writes as records, inside the caller's transaction: open, journal, write (close).

Both the SQL stores (``_stores``) and the rescue path use these; each runs in one transaction
handed in by the caller, so a turn is written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nexus.ledger import _crash, _prompts, _rescue, _turns
from nexus.ledger._decode import OriginWrite
from nexus.ledger._write import TurnOutcome, WrittenRows
from nexus.ledger.errors import LedgerBusyError, LedgerFullError, TurnNotSavedError, TurnStateError
from nexus.ledger.records import (
    CLOSED_STATUSES,
    JournalEntry,
    JournalMessage,
    JournalReply,
    Lease,
    TurnOpen,
    TurnWrite,
)
from nexus.llm import message_to_dict


def open_in(
    conn: Any,
    opening: TurnOpen,
    owner: str,
    stored: Mapping[str, str] | None = None,
    written: WrittenRows | None = None,
) -> str:
    """Store a ``streaming`` turn and its query (and its system prompt, once by hash); returns its id.

    ``stored`` maps prompts known to be committed already to their hashes: those are neither hashed nor
    written again. ``written`` collects the query's rows. The items the run will consume fence the open as
    they fence the final write (:func:`fence_in`): a run that lost its lease stores no turn."""
    fence_in(conn, opening.consumed_queue_items, None, opening.lease_fence)
    details = opening.details
    prompt = opening.system_prompt
    if prompt is not None:
        known = stored.get(prompt) if stored is not None else None
        details.system_prompt_hash = known or _prompts.store_prompt(conn, prompt)
    return _turns.open_turn(
        conn,
        opening.session_label,
        opening.parent_turn_id,
        opening.query_messages,
        details,
        owner,
        source=opening.source,
        context=opening.context,
        written=written,
    )


JournalRow = tuple[str, str, int | None, dict[str, Any]]
"""``(turn_id, kind, slot, body)``: a journal entry encoded before the transaction (``slot`` for replies)."""


def journal_rows(entries: Sequence[JournalEntry]) -> list[JournalRow]:
    """Check and encode journal entries (outside the transaction: a bad entry writes nothing)."""
    rows: list[JournalRow] = []
    for entry in entries:
        if isinstance(entry, JournalReply):
            _crash.check_partial(entry.message, entry.slot)
            rows.append(
                (entry.turn_id, _turns.PARTIAL, entry.slot, _turns.partial_entry(entry.message, entry.complete))
            )
        elif isinstance(entry, JournalMessage):
            rows.append((entry.turn_id, "message", None, message_to_dict(entry.message)))
        else:
            body = _turns.tool_call_entry(
                entry.call, entry.result, entry.started_at, entry.completed_at, entry.spawned_session_label
            )
            rows.append((entry.turn_id, "tool_call", None, body))
    return rows


def journal_in(conn: Any, rows: Sequence[JournalRow]) -> None:
    """Append (or, for a reply's slot, replace) journal entries of open turns."""
    for turn_id, kind, slot, body in rows:
        if slot is not None:
            _turns.journal_partial(conn, turn_id, slot, body)
        else:
            _turns.journal(conn, turn_id, kind, body)


def check_write(w: TurnWrite) -> None:
    """Refuse a write whose status, head policy or turn type is not one the ledger knows."""
    if w.status not in CLOSED_STATUSES:
        raise TurnStateError(
            f"status must be one of {', '.join(CLOSED_STATUSES)} for a finished turn, not {w.status!r}"
        )
    if w.if_head_moved not in ("raise", "branch"):
        raise TurnStateError(f"if_head_moved must be 'raise' or 'branch', not {w.if_head_moved!r}")
    if w.turn_type not in (None, "normal", "compaction"):
        raise TurnStateError(f"turn_type must be 'normal' or 'compaction', not {w.turn_type!r}")


def fence_in(conn: Any, consumed: Sequence[str], lease: Lease | None, lease_fence: bool) -> None:
    """Refuse (``LeaseLostError``) a turn's open or write whose run lost its session's lease.

    Consumed items a lease claimed must still be this process's at their session's current, unexpired
    epoch (unless ``lease_fence`` is False: claimed without a lease); ``lease``, when given, must be valid.
    The open is fenced too: a run whose claim committed before a takeover but whose turn opened after the
    new holder's recovery would otherwise leave a turn that no later write closes on the chain (a later
    recovery closes it as a side branch off the head the new holder moved).
    """
    fenced = lease_fence and bool(consumed)
    if lease is None and not fenced:
        return
    from nexus.ledger._claims import claimant
    from nexus.ledger._leases import check_consumed_in, check_in, lock_leases_in

    lock_leases_in(conn, consumed, lease)
    if lease is not None:
        check_in(conn, lease)
    if fenced:
        check_consumed_in(conn, consumed, claimant())


def write_in(conn: Any, w: TurnWrite, origin_ids: OriginWrite | None = None, kept: WrittenRows | None = None) -> str:
    """The whole turn write (the spec's nine steps) and the delivery of the queue items it consumed.

    Items a lease claimed fence the write: if their run lost the session's lease, nothing is written
    (``LeaseLostError``; :func:`nexus.ledger._leases.check_consumed_in`); not checked when the writer
    says it claimed them without a lease (``w.lease_fence`` False). ``kept`` collects the message rows.
    """
    fence_in(conn, w.consumed_queue_items, w.lease, w.lease_fence)
    outcome = TurnOutcome(
        w.status, w.response_messages, w.usage, w.stop_reason, w.error, w.compaction, w.tool_calls, w.turn_type
    )
    outcome.completed_at, outcome.response_sources = w.completed_at, w.response_sources
    outcome.origin_ids = origin_ids.attempt() if origin_ids is not None else None
    outcome.written = kept.attempt() if kept is not None else None
    written = _turns.write_turn(
        conn,
        w.session_label,
        w.turn_id,
        w.parent_turn_id,
        w.query_messages,
        w.details,
        outcome,
        if_head_moved=w.if_head_moved,
        source=w.source,
        context=w.context,
    )
    if w.consumed_queue_items:  # a broker's turn
        _deliver_pending()(conn, w.consumed_queue_items, written)
    return written


_DELIVER_PENDING: Callable[[Any, Sequence[str], str], int] | None = None


def _deliver_pending() -> Callable[[Any, Sequence[str], str], int]:
    """The queue's ``deliver_pending_in``, imported on the first broker turn (a plain run never uses the queue's
    rows) and kept: an import statement run per turn cost ~1.3 us, its probe of the module's ``__path__``
    raising and dropping two AttributeErrors."""
    global _DELIVER_PENDING
    if _DELIVER_PENDING is None:
        from nexus.ledger._queue_rows import deliver_pending_in

        _DELIVER_PENDING = deliver_pending_in
    return _DELIVER_PENDING


def rescued(location: str, w: TurnWrite, exc: LedgerFullError | LedgerBusyError) -> TurnNotSavedError:
    """The error for a failed final write of an opened turn, whose outcome goes to a rescue file first."""
    assert w.turn_id is not None
    saved = _rescue.RescuedTurn(
        w.turn_id,
        w.session_label,
        w.status,
        list(w.response_messages),
        w.stop_reason,
        w.error,
        tuple(w.consumed_queue_items),
    )
    return _rescue.not_saved(location, saved, exc)
