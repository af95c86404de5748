"""Group commit: the broker's concurrent small writes share one SQLite transaction.

Every ``send`` must be durable before it returns, and a run's claim before it starts; one
committed transaction per write caps a single writer at a few thousand a second. Writes that
arrive in the same event-loop iteration are committed together: the first schedules a flush
with ``call_soon``, the rest join it, and each caller resumes — in submission order — once the
shared transaction committed. Each write has its own savepoint, so one that fails (a finished
item) fails alone. A lone writer pays nothing extra: its flush runs on the next iteration.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar, cast

from nexus.ledger.broker_store import BrokerStore

T = TypeVar("T")

MAX_GROUP = 512
"""Writes per transaction at most, so one flush never holds the event loop for long."""


class GroupCommitter:
    """Collects writes and commits them in shared transactions."""

    def __init__(self, store: BrokerStore) -> None:
        self._store = store
        self._pending: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._scheduled = False

    async def write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` in the next shared transaction; returns its result once committed (or raises its error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((op, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return cast(T, await future)

    def _flush(self) -> None:
        group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
        if self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._scheduled = False
        try:
            outcomes = self._store.write_group([op for op, _ in group])
        except Exception as exc:  # nothing of the group was written: every caller hears why
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), outcome in zip(group, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
