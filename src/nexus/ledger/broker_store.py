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
from collections.abc import Sequence
from typing import Any

from nexus.ledger import _queue_reads
from nexus.ledger._agent_registry import AgentRegistry, AgentRow
from nexus.ledger._queue_reads import Held
from nexus.ledger._queue_rows import (
    REPLY_SUFFIX,
    accept_at,
    accept_in,
    accepted,
    claim_in,
    deliver_in,
    deliver_pending_in,
    move_items,
    release_in,
)
from nexus.ledger._sqlite import Database
from nexus.ledger.records import AcceptRequest, QueueItem
from nexus.llm import now_ms


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
    ) -> tuple[QueueItem, bool]:
        """Queue a message durably; returns ``(item, created)`` — ``created`` is False for a known id.

        With ``log_as_agent_message`` the agent-to-agent log row is written in the same
        transaction, so the log never names a message the queue does not have; with ``session_key``
        the per-sender session ``session_label`` is created (``routing_key`` = the key) if new.
        """
        request = AcceptRequest(
            agent_id, session_label, message_id, sender, message, mode, log_as_agent_message, session_key
        )
        return self.accept_many([request])[0]

    def accept_many(self, requests: Sequence[AcceptRequest]) -> list[tuple[QueueItem, bool]]:
        """Accept several messages in ONE transaction (group commit for concurrent senders)."""

        def run(conn: sqlite3.Connection) -> list[tuple[QueueItem, bool]]:
            now = now_ms()
            return [accept_at(conn, request, now) for request in requests]

        return self._db.write(run) if requests else []

    def queued_after(self, rowid: int, held: Held | None = None) -> tuple[list[QueueItem], int]:
        """Items still ``queued`` that were inserted after ``rowid`` (any process), and the newest rowid.

        A broker polls this to pick up messages other processes accepted while it runs.
        ``held(agent_id, session_label, item_id)`` names the rows it already holds: only the keys
        of waiting rows are read first, and the whole row only of those not held (a busy broker's
        own rows are nearly all of them: a broker that fell behind at 10,000 messages a second read
        ~2,500 whole rows a poll, 3-5 ms of the event loop four times a second). Finished rows are
        skipped by SQLite itself.
        """
        return self._db.read(lambda c: _queue_reads.queued_after(c, rowid, held))

    def last_rowid(self) -> int:
        """The newest queue row's rowid (0 for none): where :meth:`queued_after` starts."""
        return self._db.read(_queue_reads.last_rowid)

    def unanswered_replies(self) -> list[tuple[QueueItem, str]]:
        """Finished items whose sender asked for the reply later (``metadata.reply_to``) but got none yet:
        delivered ones (a crash between the turn and its reply) and failed ones (cut by crashes
        ``max_attempts`` times, or their run could not start): their asker is told ``(failed: …)``."""
        return self._db.read(_queue_reads.unanswered_replies)

    def get_item(self, item_id: str) -> QueueItem | None:
        """One queue item by id, or ``None``."""
        return self._db.read(lambda c: _queue_reads.get(c, item_id))

    def accepted(self, message_id: str) -> QueueItem | None:
        """The item a message id was accepted as, or ``None`` (a retry's sender asks where it went)."""
        return self._db.read(lambda c: accepted(c, message_id))

    def pending(self, agent_id: str | None = None) -> list[QueueItem]:
        """Items still ``queued`` or ``processing`` (of one agent, or all), in arrival order.

        ``+agent_id`` keeps the planner on the index of unfinished items whatever indexes on the
        agent exist (one on an agent's whole history walked every item the agent ever had).
        """
        return self._db.read(lambda c: _queue_reads.pending(c, agent_id))

    def items(self, *, agent_id: str | None = None, statuses: Sequence[str] = ()) -> list[QueueItem]:
        """Queue rows filtered by agent and status (all statuses when ``statuses`` is empty), oldest first.

        Unfinished and failed items are read through their own small indexes (``nexus queue list``'s
        default: queued, processing, failed), in one read transaction; any other status scans the
        table (schema 11 dropped the index of every agent's whole history: it cost each accept a page
        write of its own, and a full history is an occasional question).
        """
        return self._db.read(lambda c: _queue_reads.items(c, agent_id, statuses))

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

    def fail_exhausted(self, max_attempts: int) -> list[QueueItem]:
        """Fail every ``processing`` item (a crash cut its run) already tried ``max_attempts`` times;
        an item another live broker is running is left to that broker."""
        return self._db.write(lambda c: _queue_reads.fail_exhausted(c, max_attempts))


__all__ = [
    "REPLY_SUFFIX",
    "AcceptRequest",
    "AgentRow",
    "BrokerStore",
    "accept_at",
    "accept_in",
    "claim_in",
    "deliver_in",
    "deliver_pending_in",
    "move_items",
    "release_in",
]
