"""``run_events`` (PostgreSQL): the StreamEvents of every process's runs, one log every process reads.

Each function is one transaction's work (``fn(conn)`` for :class:`PgDatabase` ``read``/``write``). Writers
append a batch under ``pg_advisory_xact_lock``: ids are then handed out and committed in the same order, so
a reader that has seen id N has seen every committed id below N (no event appears later behind a cursor).
Each append sends one ``NOTIFY nexus_events`` (its newest id), at most once per writer's batch.
The log is trimmed as a prefix of ids (by age and by count); ``run_events_floor`` remembers up to which id,
so a resume from an id below it is known to have lost events instead of silently skipping them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.ledger.postgres._database import PgDatabase
    from nexus.ledger.postgres._listen import QueueListener

CHANNEL = "nexus_events"
"""The notification channel; the payload is the newest id of the batch just committed."""

APPEND_LOCK = 0x6E657875_73657674 & 0x7FFFFFFFFFFFFFFF
"""The advisory transaction lock appends take ("nexusevt"), a BIGINT."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row: its id (the SSE id on every process), session, type, the StreamEvent's JSON and when (ms)."""

    id: int
    session_label: str
    event_type: str
    payload: str


def append(conn: Any, rows: Sequence[tuple[str, str, str]], now_ms: int) -> int:
    """Insert ``(session_label, event_type, payload)`` rows in order, notify once; returns the newest id."""
    conn.execute("SELECT pg_advisory_xact_lock(?)", (APPEND_LOCK,))
    newest = 0
    for start in range(0, len(rows), 500):
        chunk = rows[start : start + 500]
        marks = ", ".join(["(?, ?, ?, ?)"] * len(chunk))
        params = [value for row in chunk for value in (*row, now_ms)]
        ids = conn.execute(
            f"INSERT INTO run_events (session_label, event_type, payload, created_at) VALUES {marks} RETURNING id",
            params,
        ).fetchall()
        newest = max([newest, *(int(r[0]) for r in ids)])
    conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, str(newest)))
    return newest


def after(conn: Any, cursor: int, limit: int) -> list[StoredEvent]:
    """The events with ids above ``cursor``, oldest first, at most ``limit``."""
    rows = conn.execute(
        "SELECT id, session_label, event_type, payload FROM run_events WHERE id > ? ORDER BY id LIMIT ?",
        (cursor, limit),
    ).fetchall()
    return [StoredEvent(int(i), str(s), str(t), str(p)) for i, s, t, p in rows]


def of_session(conn: Any, label: str, cursor: int, upto: int, limit: int) -> list[StoredEvent]:
    """``label``'s events with ids in ``(cursor, upto]``, oldest first, at most ``limit``."""
    rows = conn.execute(
        "SELECT id, session_label, event_type, payload FROM run_events "
        "WHERE session_label = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?",
        (label, cursor, upto, limit),
    ).fetchall()
    return [StoredEvent(int(i), str(s), str(t), str(p)) for i, s, t, p in rows]


def bounds(conn: Any) -> tuple[int, int]:
    """``(trimmed_to, newest)``: every id <= ``trimmed_to`` is gone; ``newest`` is the last id handed out (0: none)."""
    trimmed = int(conn.execute("SELECT trimmed_to FROM run_events_floor").fetchone()[0])
    newest = conn.execute("SELECT max(id) FROM run_events").fetchone()[0]
    return trimmed, max(trimmed, int(newest or 0))


def trim(conn: Any, older_than_ms: int, keep: int) -> int:
    """Delete the prefix of events created before ``older_than_ms`` or beyond the newest ``keep``; returns how many."""
    conn.execute("SELECT pg_advisory_xact_lock(?)", (APPEND_LOCK,))  # the floor and the prefix move together
    by_age = conn.execute("SELECT max(id) FROM run_events WHERE created_at < ?", (older_than_ms,)).fetchone()[0]
    newest = conn.execute("SELECT max(id) FROM run_events").fetchone()[0]
    cut = max(int(by_age or 0), int(newest or 0) - keep)
    if cut <= 0:
        return 0
    deleted = conn.execute("DELETE FROM run_events WHERE id <= ?", (cut,)).rowcount
    conn.execute("UPDATE run_events_floor SET trimmed_to = greatest(trimmed_to, ?)", (cut,))
    return int(deleted or 0)


class RunEventLog:
    """The ``run_events`` log of one PostgreSQL ledger, for the event loop (each call one transaction off it)."""

    def __init__(self, database: PgDatabase) -> None:
        self._db = database

    def listener(self) -> QueueListener | None:
        """``LISTEN nexus_events`` on a connection of its own (``None`` with ``NEXUS_PG_LISTEN=0``: poll only)."""
        from nexus.ledger.postgres._listen import QueueListener, listening_enabled

        return QueueListener(str(self._db.url), CHANNEL) if listening_enabled() else None

    async def append(self, rows: Sequence[tuple[str, str, str]]) -> int:
        """Store ``(session_label, event_type, payload_json)`` rows in order; returns the newest id."""
        from nexus.llm import now_ms

        stamp = now_ms()
        return await self._db.run_write(lambda conn: append(conn, rows, stamp))

    async def after(self, cursor: int, limit: int) -> list[StoredEvent]:
        """Every session's events after id ``cursor``, oldest first."""
        return await self._db.run_read(lambda conn: after(conn, cursor, limit))

    async def resume(self, label: str, cursor: int, upto: int, limit: int) -> tuple[int, list[StoredEvent]]:
        """``(trimmed_to, events)``: the log's floor and ``label``'s events in ``(cursor, upto]``, one snapshot."""
        return await self._db.run_read(lambda conn: (bounds(conn)[0], of_session(conn, label, cursor, upto, limit)))

    async def bounds(self) -> tuple[int, int]:
        """``(trimmed_to, newest)``."""
        return await self._db.run_read(bounds)

    async def trim(self, older_than_ms: int, keep: int) -> int:
        """Drop the events older than ``older_than_ms`` and all but the newest ``keep``; returns how many."""
        return await self._db.run_write(lambda conn: trim(conn, older_than_ms, keep))
