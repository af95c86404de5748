"""The crash journal's recovery: closing the open turns of a process that died.

``Ledger.open_turn`` stamps each turn with its owner (``host:pid``, :mod:`nexus.ledger._owners`);
``Ledger.recover`` closes the open turns of dead owners as ``aborted`` with what they journaled -
or, when the owner's final write failed and left a rescue file (``_rescue``), with the outcome
saved there.
"""

from __future__ import annotations

import sqlite3

from nexus.ledger import _rescue, _turns
from nexus.ledger._write import TurnOutcome
from nexus.ledger.errors import LedgerError
from nexus.ledger.records import CLOSED_STATUSES, HEAD, TurnDetails
from nexus.llm import AssistantMessage


def recover_turn(conn: sqlite3.Connection, turn_id: str, note: str) -> tuple[str, bool]:
    """Close one open turn as ``aborted`` with what it journaled; returns (session, pointer moved)."""
    return _turns.recover_turn(conn, turn_id, note)


def finish_rescued(conn: sqlite3.Connection, turn_id: str, saved: _rescue.RescuedTurn) -> tuple[str, bool]:
    """Close an open turn with the outcome its owner saved to a rescue file; returns (session, pointer moved)."""
    found = _turns.lock_open_turn(conn, turn_id, "session_label, parent_turn_id")
    if found is None:
        return "", False
    (label, parent_id), head = found
    status = saved.status if saved.status in CLOSED_STATUSES else "aborted"
    outcome = TurnOutcome(
        status=status, response_messages=saved.response_messages, stop_reason=saved.stop_reason, error=saved.error
    )
    _turns.write_turn(conn, label, turn_id, HEAD, (), TurnDetails(), outcome, if_head_moved="branch", reason="recover")
    if saved.queue_items:
        from nexus.ledger._queue_rows import deliver_pending_in

        deliver_pending_in(conn, saved.queue_items, turn_id)
    return str(label), head == parent_id


def check_partial(message: object, slot: object) -> None:
    """Refuse a ``journal_partial`` call whose message is not an assistant reply or whose slot is not an int >= 0."""
    if not isinstance(message, AssistantMessage):
        raise LedgerError(
            f"journal_partial takes an AssistantMessage, got {type(message).__name__}; "
            "journal other messages with journal_message"
        )
    if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
        raise LedgerError(f"journal_partial needs slot >= 0 (an int numbering the turn's replies), got {slot!r}")
