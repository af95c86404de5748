"""Group commit: the broker's concurrent small writes share one SQLite transaction.

Every ``send`` must be durable before it returns, and a run's claim before it starts; one
committed transaction per write caps a single writer at a few thousand a second. Writes that
arrive in the same event-loop iteration are committed together: the first schedules a flush
with ``call_soon``, the rest join it, and each caller resumes — in submission order — once the
shared transaction committed. A lone writer pays nothing extra: its flush runs on the next
iteration.

The two writes of the queue path have their own entry points so a group does them in bulk:
the claims of every run starting in the iteration are one ``UPDATE`` (:meth:`claim`), the
accepts one prepared ``INSERT`` each with no read-back (:meth:`accept`). Writes of one group are
independent: each touches rows committed before it was submitted. If the group fails as a
whole because one write failed (a claim of a finished item), it is run again with a savepoint
per write (:meth:`BrokerStore.write_group`), so the failing write fails alone.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from nexus.ledger.broker_store import AcceptRequest, BrokerQueueItem, BrokerStore, accept_at, accept_in, claim_in
from nexus.ledger.errors import LedgerBusyError, LedgerFullError
from nexus.llm.types import now_ms

T = TypeVar("T")

MAX_GROUP = 512
"""Writes per transaction at most, so one flush never holds the event loop for long."""


@dataclass(slots=True)
class _Write:
    """One submitted write: ``op`` runs it alone; ``accept``/``claim`` let a group do it in bulk."""

    future: asyncio.Future[Any]
    op: Callable[[sqlite3.Connection], Any]
    accept: AcceptRequest | None = None
    claim: Sequence[str] = ()


class GroupCommitter:
    """Collects writes and commits them in shared transactions."""

    def __init__(self, store: BrokerStore) -> None:
        self._store = store
        self._pending: list[_Write] = []
        self._scheduled = False

    async def write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` in the next shared transaction; returns its result once committed (or raises its error)."""
        return cast(T, await self._submit(op))

    async def accept(self, request: AcceptRequest, *, now: bool = False) -> tuple[BrokerQueueItem, bool]:
        """:func:`accept_in` in the next shared transaction: ``(item, created)`` once committed.

        ``now``: when no group is forming, commit it at once in a transaction of its own
        instead of on the next loop iteration. An HTTP accept takes it: every iteration it
        waits (for the flush, then to resume) is spent behind the runs' work on the same loop.
        Order is kept: it never overtakes a write submitted before it.
        """
        op: Callable[[sqlite3.Connection], tuple[BrokerQueueItem, bool]] = lambda conn: accept_in(conn, request)  # noqa: E731
        if now and not self._pending:
            outcome = self._run([_Write(asyncio.get_running_loop().create_future(), op, request)])[0]
            if isinstance(outcome, Exception):
                raise outcome
            return cast(tuple[BrokerQueueItem, bool], outcome)
        return cast(tuple[BrokerQueueItem, bool], await self._submit(op, accept=request))

    async def claim(self, item_ids: Sequence[str]) -> None:
        """:func:`claim_in` in the next shared transaction, one statement with the group's other claims."""
        await self._submit(lambda conn: claim_in(conn, item_ids), claim=item_ids)

    def _submit(
        self, op: Callable[[sqlite3.Connection], Any], *, accept: AcceptRequest | None = None, claim: Sequence[str] = ()
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append(_Write(future, op, accept, claim))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
        if self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._scheduled = False
        try:
            outcomes = self._run(group)
        except Exception as exc:  # nothing of the group was written: every caller hears why
            for write in group:
                if not write.future.done():
                    write.future.set_exception(exc)
            return
        for write, outcome in zip(group, outcomes, strict=True):
            if write.future.done():
                continue
            if isinstance(outcome, Exception):
                write.future.set_exception(outcome)
            else:
                write.future.set_result(outcome)

    def _run(self, group: list[_Write]) -> list[object]:
        """The group in bulk in one transaction; on a write's failure, each write alone (savepoints)."""
        try:
            return self._store.database.write(lambda conn: _in_bulk(conn, group))
        except (LedgerBusyError, LedgerFullError):
            raise  # the database failed, not one write: every caller hears it
        except Exception:
            return self._store.write_group([write.op for write in group])


def _in_bulk(conn: sqlite3.Connection, group: list[_Write]) -> list[object]:
    """Accepts, then every claim as one statement, then the other writes in submission order."""
    now = now_ms()
    outcomes: list[object] = [None] * len(group)
    claimed: list[str] = []
    for index, write in enumerate(group):
        if write.accept is not None:
            outcomes[index] = accept_at(conn, write.accept, now)
        elif write.claim:
            claimed.extend(write.claim)
    if claimed:
        claim_in(conn, claimed)
    for index, write in enumerate(group):
        if write.accept is None and not write.claim:
            outcomes[index] = write.op(conn)
    return outcomes
