"""Durable per-session queue rows (``queue_items``): write-through storage for the broker's queues.

The broker keeps its queues in memory for speed and here for truth: a message accepted by
``send`` is enqueued before it is acknowledged, and on start-up every item still ``queued``
or ``processing`` is reloaded (a ``processing`` item was interrupted by a crash).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from nexus.ledger._rows import dumps, dumps_opt, loads_opt
from nexus.ledger._schema import PENDING
from nexus.ledger._sessions import resolve_label
from nexus.ledger._ulid import new_ulid
from nexus.ledger.errors import LedgerError, TurnNotFound
from nexus.ledger.records import QUEUE_STATUSES, QueueItem
from nexus.llm.types import now_ms

_COLUMNS = (
    "id, session_label, message_json, mode, status, enqueued_at, started_at, completed_at, error, turn_id, "
    "metadata_json"
)


def _item(row: tuple[Any, ...]) -> QueueItem:
    return QueueItem(
        id=row[0],
        session_label=row[1],
        message=loads_opt(row[2]),
        mode=row[3],
        status=row[4],
        enqueued_at=row[5],
        started_at=row[6],
        completed_at=row[7],
        error=row[8],
        turn_id=row[9],
        metadata=loads_opt(row[10]),
    )


def enqueue(
    conn: sqlite3.Connection, label: str, message: object, mode: str, metadata: dict[str, object] | None
) -> QueueItem:
    """Store a queued message for a session (status ``queued``; ``label`` may be an alias)."""
    label = resolve_label(conn, label)
    item_id = new_ulid()
    conn.execute(
        "INSERT INTO queue_items (id, session_label, message_json, mode, status, enqueued_at, metadata_json)"
        " VALUES (?, ?, ?, ?, 'queued', ?, ?)",
        (item_id, label, dumps(message), mode, now_ms(), dumps_opt(metadata)),
    )
    return get(conn, item_id)


def get(conn: sqlite3.Connection, item_id: str) -> QueueItem:
    """One queue item; raises :class:`TurnNotFound` (what="queue item")."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM queue_items WHERE id = ?", (item_id,)).fetchone()
    if row is None:
        raise TurnNotFound(item_id, "queue item")
    return _item(row)


def pending(conn: sqlite3.Connection, label: str | None) -> list[QueueItem]:
    """Items still ``queued`` or ``processing`` (of one session, or all), oldest first."""
    sql = f"SELECT {_COLUMNS} FROM queue_items WHERE {PENDING}"
    args: tuple[object, ...] = ()
    if label is not None:
        sql += " AND session_label = ?"
        args = (resolve_label(conn, label),)
    return [_item(r) for r in conn.execute(sql + " ORDER BY enqueued_at, id", args)]


def update(conn: sqlite3.Connection, item_id: str, status: str, turn_id: str | None, error: str | None) -> QueueItem:
    """Move an item to ``status``; ``processing`` stamps started_at, a final status completed_at."""
    if status not in QUEUE_STATUSES:
        raise LedgerError(f"queue status must be one of {', '.join(QUEUE_STATUSES)}, not {status!r}")
    current = get(conn, item_id)
    if current.status in ("delivered", "failed", "dropped"):
        raise LedgerError(f"queue item {item_id!r} is already {current.status}; a finished item is never re-run")
    now = now_ms()
    started = now if status == "processing" else current.started_at
    completed = now if status in ("delivered", "failed", "dropped") else None
    conn.execute(
        "UPDATE queue_items SET status = ?, started_at = ?, completed_at = ?, turn_id = COALESCE(?, turn_id),"
        " error = ? WHERE id = ?",
        (status, started, completed, turn_id, error, item_id),
    )
    return get(conn, item_id)
