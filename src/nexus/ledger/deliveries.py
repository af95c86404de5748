"""Where each reply went: the ``deliveries`` rows of ``agents.db`` (seed 004, DESIGN §4.5).

A delivery is one run's reply sent to one adapter target (a Telegram chat, a JSONL file...).
Its row is written once, when the delivery has ended and after the run's turn is in the
ledger: streaming and persistence stay separate, so a turn never waits on an adapter and is
kept whatever the adapter did; the delivery row says what the adapter did. The ledger knows
nothing of adapters (a lower layer): the caller passes plain values.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import field
from typing import Any, Literal

from nexus._dataclass import dataclass
from nexus.ledger._rows import dumps, in_lists, loads_opt
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger._ulid import new_ulid

DeliveryStatus = Literal["delivered", "partial", "failed"]
DELIVERY_STATUSES: tuple[str, ...] = ("delivered", "partial", "failed")

_COLUMNS = (
    "id, turn_id, queue_item_id, session_label, run_id, adapter, account_id, target_json, path, status, "
    "message_ids_json, error, attempts, blocks_sent, started_at, completed_at"
)


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One delivery as stored: the turn it carried, the target, the outcome and the platform's message ids.

    ``status``: ``delivered`` (the adapter confirmed all of it), ``partial`` (some text reached the
    user before it failed), ``failed`` (nothing did). ``attempts`` counts ``send`` calls (retries
    included) on the block path and is 1 for a native ``stream`` delivery.
    """

    turn_id: str | None
    session_label: str
    adapter: str
    account_id: str
    target: dict[str, Any]
    path: str
    status: DeliveryStatus
    started_at: int
    completed_at: int
    message_ids: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: int = 0
    blocks_sent: int = 0
    queue_item_id: str | None = None
    run_id: str | None = None
    id: str = ""

    def to_json(self) -> dict[str, Any]:
        """The record as the CLI (``--json``) and the HTTP API show it."""
        return {
            "id": self.id,
            "turn_id": self.turn_id,
            "queue_item_id": self.queue_item_id,
            "session_label": self.session_label,
            "run_id": self.run_id,
            "adapter": self.adapter,
            "account_id": self.account_id,
            "target": dict(self.target),
            "path": self.path,
            "status": self.status,
            "message_ids": list(self.message_ids),
            "error": self.error,
            "attempts": self.attempts,
            "blocks_sent": self.blocks_sent,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }


def _record(row: tuple[Any, ...]) -> DeliveryRecord:
    (rid, turn_id, item_id, label, run_id, adapter, account, target, path, status, ids, error, attempts,
     blocks, started, completed) = row  # fmt: skip
    return DeliveryRecord(
        turn_id=turn_id, session_label=label, adapter=adapter, account_id=account, target=loads_opt(target) or {},
        path=path, status=status, started_at=started, completed_at=completed, message_ids=loads_opt(ids) or [],
        error=error, attempts=attempts, blocks_sent=blocks, queue_item_id=item_id, run_id=run_id, id=rid,
    )  # fmt: skip


class DeliveryLog:
    """The ``deliveries`` table of one ledger database (share the database of a ``Ledger``)."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def record(self, record: DeliveryRecord) -> DeliveryRecord:
        """Store one finished delivery; returns it with its new id."""
        if record.status not in DELIVERY_STATUSES:
            raise ValueError(f"delivery status must be one of {', '.join(DELIVERY_STATUSES)}, not {record.status!r}")
        rid = record.id or new_ulid()

        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"INSERT INTO deliveries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, record.turn_id, record.queue_item_id, record.session_label, record.run_id, record.adapter,
                 record.account_id, dumps(record.target), record.path, record.status, dumps(record.message_ids),
                 record.error, record.attempts, record.blocks_sent, record.started_at, record.completed_at),
            )  # fmt: skip

        self._db.write(run)
        return _with_id(record, rid)

    def for_turns(self, turn_ids: Sequence[str]) -> dict[str, list[DeliveryRecord]]:
        """The deliveries of each of ``turn_ids`` (oldest first); turns without any are left out."""
        out: dict[str, list[DeliveryRecord]] = {}
        ids = list(dict.fromkeys(turn_ids))
        for chunk, marks in in_lists(ids):  # stay under SQLite's parameter limit
            rows = self._db.read(
                lambda c, chunk=chunk, marks=marks: c.execute(  # type: ignore[misc]
                    f"SELECT {_COLUMNS} FROM deliveries WHERE turn_id IN ({marks}) ORDER BY completed_at, id",
                    chunk,
                ).fetchall()
            )
            for row in rows:
                record = _record(row)
                out.setdefault(record.turn_id or "", []).append(record)
        return out

    def for_turn(self, turn_id: str) -> list[DeliveryRecord]:
        """The deliveries of one turn, oldest first."""
        return self.for_turns([turn_id]).get(turn_id, [])

    def recent(self, *, session_label: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        """The latest deliveries (of one session, or of all), newest first."""
        where, params = ("WHERE session_label = ?", [session_label]) if session_label is not None else ("", [])
        rows = self._db.read(
            lambda c: c.execute(
                f"SELECT {_COLUMNS} FROM deliveries {where} ORDER BY completed_at DESC, id DESC LIMIT ?",
                [*params, max(1, limit)],
            ).fetchall()
        )
        return [_record(row) for row in rows]


def _with_id(record: DeliveryRecord, rid: str) -> DeliveryRecord:
    from dataclasses import replace

    return replace(record, id=rid)
