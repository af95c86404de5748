"""The process side of the crash journal: who owns an open turn, whether that process died, closing its turns.

``Ledger.open_turn`` stamps each turn with its owner (``host:pid``); ``Ledger.recover`` asks
here which open turns belong to dead processes and closes them as ``aborted`` with what they
journaled.
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3

from nexus.ledger import _turns
from nexus.ledger._rows import TURN_COLUMNS, turn_from_row
from nexus.ledger._sqlite import Database
from nexus.ledger.errors import LedgerError
from nexus.ledger.records import Turn
from nexus.llm.types import AssistantMessage

_OPEN = "status IN ('pending', 'streaming')"


def owner() -> str:
    """``host:pid`` of this process (computed per call: a forked child has another pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    return pid != os.getpid() and not _pid_alive(pid)


def recover(db: Database, *, force: bool) -> list[str]:
    """Close the open turns of dead owners (every open turn if ``force``); returns the recovered ids."""
    rows = db.read(lambda c: c.execute(f"SELECT id, owner FROM turns WHERE {_OPEN}").fetchall())
    recovered: list[str] = []
    for turn_id, turn_owner in rows:
        if not force and not owner_dead(turn_owner):
            continue
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


def open_turns(db: Database) -> list[Turn]:
    """Turns still open (being run, or left by a dead process until recovered), oldest first."""
    return db.read(
        lambda c: [turn_from_row(r) for r in c.execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE {_OPEN} ORDER BY id")]
    )


def check_partial(message: object, slot: object) -> None:
    """Refuse a ``journal_partial`` call whose message is not an assistant reply or whose slot is not an int >= 0."""
    if not isinstance(message, AssistantMessage):
        raise LedgerError(
            f"journal_partial takes an AssistantMessage, got {type(message).__name__}; "
            "journal other messages with journal_message"
        )
    if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
        raise LedgerError(f"journal_partial needs slot >= 0 (an int numbering the turn's replies), got {slot!r}")
