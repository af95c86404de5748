"""The broker's durable rows in ``agents.db``: the agent registry, queue items, agent-to-agent log.

The broker keeps its queues in memory for speed; these rows are the truth it reloads on start.
Three promises rest on this module:

* ``accept`` is idempotent on the message id (a unique index, one ``INSERT ... ON CONFLICT``),
  so a redelivered message is recognised, never queued twice;
* ``claim`` counts attempts, so a message whose run a crash cut can be retried a bounded number
  of times and then failed with its reason (``fail_exhausted``);
* ``deliver`` may run inside the same transaction as the turn that consumed the items (it takes
  a connection), so an item is never marked delivered without its turn, nor the reverse.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from nexus.ledger._agent_registry import AgentRegistry, AgentRow
from nexus.ledger._claims import held_by_others
from nexus.ledger._queue_rows import (
    _ITEM_COLUMNS,
    REPLY_SUFFIX,
    AcceptRequest,
    BrokerQueueItem,
    _is_op_error,
    _item,
    _placeholders,
    accept_at,
    accept_in,
    claim_in,
    deliver_in,
    deliver_pending_in,
    move_items,
    release_in,
)
from nexus.ledger._rows import in_lists
from nexus.ledger._schema import PENDING
from nexus.ledger._sqlite import Database
from nexus.ledger.errors import LedgerError
from nexus.llm.types import now_ms


class BrokerStore(AgentRegistry):
    """Durable broker rows on one ledger database (share the :class:`Database` of a ``Ledger``):
    the agent registry (:class:`~nexus.ledger._agent_registry.AgentRegistry`) and the queue items."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def database(self) -> Database:
        """The database these rows live in (the broker's group commit writes through it)."""
        return self._db

    # ------------------------------------------------------------------ queue

    def accept(
        self,
        *,
        agent_id: str,
        session_label: str,
        message_id: str,
        sender: str | None,
        message: Any,
        mode: str,
        log_as_agent_message: bool = False,
        session_key: str | None = None,
    ) -> tuple[BrokerQueueItem, bool]:
        """Queue a message durably; returns ``(item, created)`` — ``created`` is False for a known id.

        With ``log_as_agent_message`` the agent-to-agent log row is written in the same
        transaction, so the log never names a message the queue does not have; with ``session_key``
        the per-sender session ``session_label`` is created (``routing_key`` = the key) if new.
        """
        request = AcceptRequest(
            agent_id, session_label, message_id, sender, message, mode, log_as_agent_message, session_key
        )
        return self.accept_many([request])[0]

    def accept_many(self, requests: Sequence[AcceptRequest]) -> list[tuple[BrokerQueueItem, bool]]:
        """Accept several messages in ONE transaction (group commit for concurrent senders)."""

        def run(conn: sqlite3.Connection) -> list[tuple[BrokerQueueItem, bool]]:
            now = now_ms()
            return [accept_at(conn, request, now) for request in requests]

        return self._db.write(run) if requests else []

    def write_group(self, ops: Sequence[Callable[[sqlite3.Connection], object]]) -> list[object | Exception]:
        """Run several writes in ONE transaction (group commit); an op that raises fails alone.

        The group first runs plainly; only if an op raises is it run again with a savepoint per
        op, so the failing op is rolled back alone and its exception returned in its place while
        the others commit together. Ops may run more than once, so they must only touch the
        database.
        """

        def plain(conn: sqlite3.Connection) -> list[object | Exception]:
            return [op(conn) for op in ops]

        def isolated(conn: sqlite3.Connection) -> list[object | Exception]:
            outcomes: list[object | Exception] = []
            for op in ops:
                conn.execute("SAVEPOINT group_op")
                try:
                    outcomes.append(op(conn))
                except Exception as exc:
                    conn.execute("ROLLBACK TO group_op")
                    outcomes.append(exc)
                conn.execute("RELEASE group_op")
            return outcomes

        if not ops:
            return []
        try:
            return self._db.write(plain)
        except LedgerError as exc:
            if not _is_op_error(exc):
                raise
            return self._db.write(isolated)
        except (sqlite3.IntegrityError, ValueError, TypeError, KeyError):
            return self._db.write(isolated)

    def queued_after(
        self, rowid: int, held: Callable[[str, str, str], bool] | None = None
    ) -> tuple[list[BrokerQueueItem], int]:
        """Items still ``queued`` that were inserted after ``rowid`` (any process), and the newest rowid.

        A broker polls this to pick up messages other processes accepted while it runs.
        ``held(agent_id, session_label, item_id)`` names the rows it already holds: only the keys
        of waiting rows are read first, and the whole row only of those not held (a busy broker's
        own rows are nearly all of them: a broker that fell behind at 10,000 messages a second read
        ~2,500 whole rows a poll, 3-5 ms of the event loop four times a second). Finished rows are
        skipped by SQLite itself.
        """
        keys = (
            "SELECT rowid, id, agent_id, session_label FROM queue_items"
            " WHERE rowid > ? AND agent_id IS NOT NULL AND +status = 'queued' ORDER BY rowid"
        )

        def read(conn: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], int]:
            # one read transaction: the rows and the newest rowid are of the same snapshot
            found = conn.execute(keys, (rowid,)).fetchall()
            wanted: list[int] = [key[0] for key in found if held is None or not held(key[2], key[3], key[1])]
            rows: list[tuple[Any, ...]] = []
            for chunk, marks in in_lists(wanted):
                sql = f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE rowid IN ({marks}) ORDER BY rowid"
                rows.extend(conn.execute(sql, chunk).fetchall())
            newest = conn.execute("SELECT MAX(rowid) FROM queue_items").fetchone()[0]
            return rows, max(rowid, int(newest or 0))

        rows, newest = self._db.read(read)
        return [_item(row) for row in rows], newest

    def last_rowid(self) -> int:
        """The newest queue row's rowid (0 for none): where :meth:`queued_after` starts."""
        row = self._db.read(lambda c: c.execute("SELECT COALESCE(MAX(rowid), 0) FROM queue_items").fetchone())
        return int(row[0])

    def unanswered_replies(self) -> list[tuple[BrokerQueueItem, str]]:
        """Finished items whose sender asked for the reply later (``metadata.reply_to``) but got none yet:
        delivered ones (a crash between the turn and its reply) and failed ones (cut by crashes
        ``max_attempts`` times, or their run could not start): their asker is told ``(failed: …)``."""
        columns = ", ".join("q." + column.strip() for column in _ITEM_COLUMNS.split(","))
        sql = (
            f"SELECT json_extract(q.message_json, '$.metadata.reply_to'), {columns}"
            " FROM queue_items q INDEXED BY queue_items_awaiting_reply"
            " WHERE q.awaits_reply = 1 AND q.status IN ('delivered', 'failed') AND q.agent_id IS NOT NULL"
            " AND json_extract(q.message_json, '$.metadata.reply_to') IS NOT NULL"
            f" AND NOT EXISTS (SELECT 1 FROM queue_items r WHERE r.message_id = q.message_id || '{REPLY_SUFFIX}')"
        )
        rows = self._db.read(lambda c: c.execute(sql).fetchall())
        return [(_item(row[1:]), str(row[0])) for row in rows]

    def get_item(self, item_id: str) -> BrokerQueueItem | None:
        """One queue item by id, or ``None``."""
        row = self._db.read(
            lambda c: c.execute(f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE id = ?", (item_id,)).fetchone()
        )
        return None if row is None else _item(row)

    def pending(self, agent_id: str | None = None) -> list[BrokerQueueItem]:
        """Items still ``queued`` or ``processing`` (of one agent, or all), in arrival order.

        ``+agent_id`` keeps the planner on the index of unfinished items whatever indexes on the
        agent exist (one on an agent's whole history walked every item the agent ever had).
        """
        sql = f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE {PENDING}"
        args: tuple[object, ...] = ()
        if agent_id is not None:
            sql += " AND +agent_id = ?"
            args = (agent_id,)
        rows = self._db.read(lambda c: c.execute(sql + " ORDER BY enqueued_at, id", args).fetchall())
        return [_item(row) for row in rows]

    def items(self, *, agent_id: str | None = None, statuses: Sequence[str] = ()) -> list[BrokerQueueItem]:
        """Queue rows filtered by agent and status (all statuses when ``statuses`` is empty), oldest first.

        Unfinished and failed items are read through their own small indexes (``nexus queue list``'s
        default: queued, processing, failed), in one read transaction; any other status scans the
        table (schema 11 dropped the index of every agent's whole history: it cost each accept a page
        write of its own, and a full history is an occasional question).
        """
        wanted = set(statuses)
        queries: list[tuple[str, list[object]]] = []
        if not wanted or not wanted <= {"queued", "processing", "failed"}:
            queries.append(_items_query(agent_id, statuses, "agent_id = ?"))
        else:
            unfinished = [status for status in statuses if status != "failed"]
            if unfinished:  # +agent_id: the pending index whatever else indexes the agent
                queries.append(_items_query(agent_id, unfinished, "+agent_id = ?", PENDING))
            if "failed" in wanted:  # named: without statistics SQLite may prefer another index
                failed = _items_query(agent_id, (), "agent_id = ?", "status = 'failed'", index="queue_items_failed")
                queries.append(failed)
        rows = self._db.read(lambda c: [row for sql, args in queries for row in c.execute(sql, args).fetchall()])
        found = [_item(row) for row in rows]
        return sorted(found, key=lambda item: (item.enqueued_at, item.id)) if len(queries) > 1 else found

    def claim(self, item_ids: Sequence[str]) -> None:
        """A run takes these items: ``processing``, one more attempt counted."""
        if item_ids:
            self._db.write(lambda c: claim_in(c, item_ids))

    def release(self, item_ids: Sequence[str]) -> None:
        """A run handed these items back unconsumed (a returned steer): ``queued`` again.

        The attempt its claim counted is taken back: only a run that consumed (or was cut while
        holding) an item counts towards the crash-retry limit.
        """
        if item_ids:
            self._db.write(lambda c: release_in(c, item_ids))

    def deliver(self, item_ids: Sequence[str], turn_id: str, conn: sqlite3.Connection | None = None) -> None:
        """Mark items consumed by ``turn_id``; pass ``conn`` to join the turn's own transaction."""
        if not item_ids:
            return
        if conn is not None:
            deliver_in(conn, item_ids, turn_id)
        else:
            self._db.write(lambda c: deliver_in(c, item_ids, turn_id))

    def drop(self, item_ids: Sequence[str], reason: str) -> None:
        """Items removed by a drop policy or ``clear_queue``: ``dropped`` with the reason."""
        if item_ids:
            self._db.write(lambda c: move_items(c, item_ids, "dropped", error=reason))

    def fail(self, item_ids: Sequence[str], reason: str) -> None:
        """Items that will not be run again: ``failed`` with the reason (shown by ``nexus queue list``)."""
        if item_ids:
            self._db.write(lambda c: move_items(c, item_ids, "failed", error=reason))

    def fail_exhausted(self, max_attempts: int) -> list[BrokerQueueItem]:
        """Fail every ``processing`` item (a crash cut its run) already tried ``max_attempts`` times.

        An item another live broker is running is not a crash's leftover: it is left to that broker.
        """

        def run(conn: sqlite3.Connection) -> list[BrokerQueueItem]:
            rows = conn.execute(
                f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE {PENDING} AND status = 'processing' AND attempts >= ?",
                (max_attempts,),
            ).fetchall()
            items = [_item(row) for row in rows]
            running = held_by_others(conn, [item.id for item in items])
            items = [item for item in items if item.id not in running]
            reason = f"its run was cut {max_attempts} times (the process died); not retried again"
            move_items(conn, [item.id for item in items], "failed", error=reason)
            return items

        return self._db.write(run)


def _items_query(
    agent_id: str | None, statuses: Sequence[str], agent_term: str, *extra: str, index: str | None = None
) -> tuple[str, list[object]]:
    """The SQL and arguments of one :meth:`BrokerStore.items` read (``agent_term`` names the agent)."""
    where: list[str] = ["agent_id IS NOT NULL", *extra]
    args: list[object] = []
    if agent_id is not None:
        where.append(agent_term)
        args.append(agent_id)
    if statuses:
        where.append(f"status IN ({_placeholders(statuses)})" if len(statuses) > 1 else "status = ?")
        args.extend(statuses)
    source = f"queue_items INDEXED BY {index}" if index else "queue_items"
    return f"SELECT {_ITEM_COLUMNS} FROM {source} WHERE {' AND '.join(where)} ORDER BY enqueued_at, id", args


__all__ = [
    "REPLY_SUFFIX",
    "AcceptRequest",
    "AgentRow",
    "BrokerQueueItem",
    "BrokerStore",
    "accept_at",
    "accept_in",
    "claim_in",
    "deliver_in",
    "deliver_pending_in",
    "move_items",
    "release_in",
]
