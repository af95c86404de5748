"""The process side of the crash journal: who owns an open turn, whether that process died, closing its turns.

``Ledger.open_turn`` stamps each turn with its owner (``host:pid``); ``Ledger.recover`` asks
here which open turns belong to dead processes and closes them as ``aborted`` with what they
journaled - or, when the owner's final write failed and left a rescue file (``_rescue``),
with the outcome saved there.
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from nexus.ledger import _rescue, _turns
from nexus.ledger._rows import TURN_COLUMNS, turn_from_row
from nexus.ledger._sqlite import Database
from nexus.ledger._write import HEAD, TurnFields, TurnOutcome, session_head
from nexus.ledger.errors import LedgerError
from nexus.ledger.records import CLOSED_STATUSES, OPEN_STATUSES, Turn
from nexus.llm.types import AssistantMessage

_OPEN = "status IN ('pending', 'streaming')"


def owner() -> str:
    """``host:pid`` of this process (computed per call: a forked child has another pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Linux: the process has exited and only its exit status is left (``/proc/PID/stat`` state Z or X).

    A SIGKILLed ``nexus`` whose parent has not reaped it yet is such a process; it holds no lock
    and will never finish its turn. Elsewhere (no ``/proc``) this says False.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    return bool(fields) and fields[0] in ("Z", "X")


def owner_dead(turn_owner: str | None) -> bool:
    """True when the owner is a process of this host that no longer runs (or is unknown).

    Another host's process cannot be checked, so it counts as alive.
    """
    if not turn_owner:
        return True
    host, _, pid_text = turn_owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and not pid_alive(pid)


def recover(
    db: Database, *, force: bool, session: str | None = None, turn_ids: Sequence[str] | None = None
) -> list[str]:
    """Close the open turns of dead owners (every open turn if ``force``, exactly ``turn_ids`` if given)."""
    rows = db.read(
        lambda c: c.execute(
            f"SELECT id, owner FROM turns WHERE {_OPEN} AND (? IS NULL OR session_label = ?)", (session, session)
        ).fetchall()
    )
    recovered: list[str] = []
    for turn_id, turn_owner in rows:
        if turn_ids is not None:
            if turn_id not in turn_ids:
                continue
        elif not force and not owner_dead(turn_owner):
            continue
        rescue = _rescue.find(db.path, str(turn_id)) if db.path != ":memory:" else None
        if rescue is not None and (saved := _rescue.load(rescue)) is not None:
            label, _ = db.write(functools.partial(_finish_rescued, turn_id=str(turn_id), saved=saved))
            if label:
                _rescue.discard(rescue)
        else:
            note = (
                f"the process running this turn ({turn_owner or 'unknown'}) stopped before finishing it; "
                "closed by recover()"
            )
            label, _ = db.write(functools.partial(_recover_one, turn_id=str(turn_id), note=note))
        if label:
            recovered.append(str(turn_id))
    return recovered


def _recover_one(conn: sqlite3.Connection, *, turn_id: str, note: str) -> tuple[str, bool]:
    return _turns.recover_turn(conn, turn_id, note)


def _finish_rescued(conn: sqlite3.Connection, *, turn_id: str, saved: _rescue.RescuedTurn) -> tuple[str, bool]:
    """Close an open turn with the outcome its owner saved to a rescue file; returns (session, pointer moved)."""
    row = conn.execute("SELECT session_label, parent_turn_id, status FROM turns WHERE id = ?", (turn_id,)).fetchone()
    if row is None or row[2] not in OPEN_STATUSES:
        return "", False
    label, parent_id, _ = row
    status = saved.status if saved.status in CLOSED_STATUSES else "aborted"
    outcome = TurnOutcome(
        status=status, response_messages=saved.response_messages, stop_reason=saved.stop_reason, error=saved.error
    )
    head = session_head(conn, label)
    _turns.write_turn(conn, label, turn_id, HEAD, (), TurnFields(), outcome, if_head_moved="branch", reason="recover")
    if saved.queue_items:
        from nexus.ledger.broker_store import deliver_pending_in

        deliver_pending_in(conn, saved.queue_items, turn_id)
    return str(label), head == parent_id


def open_turns(db: Database, session: str | None = None) -> list[Turn]:
    """Turns still open (being run, or left by a dead process until recovered), oldest first."""
    return db.read(
        lambda c: [
            turn_from_row(r)
            for r in c.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE {_OPEN} AND (? IS NULL OR session_label = ?) ORDER BY id",
                (session, session),
            )
        ]
    )


def open_owners(db: Database, session: str) -> list[str]:
    """The owners (``host:pid``, ``""`` if unknown) of the session's open turns."""
    rows = db.read(
        lambda c: c.execute(f"SELECT owner FROM turns WHERE {_OPEN} AND session_label = ?", (session,)).fetchall()
    )
    return [str(r[0] or "") for r in rows]


def check_partial(message: object, slot: object) -> None:
    """Refuse a ``journal_partial`` call whose message is not an assistant reply or whose slot is not an int >= 0."""
    if not isinstance(message, AssistantMessage):
        raise LedgerError(
            f"journal_partial takes an AssistantMessage, got {type(message).__name__}; "
            "journal other messages with journal_message"
        )
    if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
        raise LedgerError(f"journal_partial needs slot >= 0 (an int numbering the turn's replies), got {slot!r}")
