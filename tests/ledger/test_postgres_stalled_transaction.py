"""A process stalled inside a transaction (``SIGSTOP``, a frozen VM) keeps no other broker from a session.

The broker fault test's paused broker was not taken over about one run in three under load: it had been
stopped inside a transaction, and its row locks lived as long as the stopped process. Another broker's
acquire skipped the locked lease row (``FOR UPDATE SKIP LOCKED``) however long ago the lease expired, or
waited for good on the lease row the stopped one had just inserted (and with it every other write of that
broker). The server now ends a transaction idle for ``IDLE_IN_TRANSACTION_S``; the stalled process, when it
goes on, finds its connection ended, runs the transaction again and meets the lease as it now is.

Real PostgreSQL (a fresh database); the stall is a worker thread of one ledger waiting mid-transaction,
which the server sees as a stopped process does: a connection idle inside a transaction.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from nexus.ledger import LeaseLostError, Ledger
from nexus.ledger._leases import acquire_in, check_in, lock_leases_in
from nexus.ledger.records import Lease

TTL_MS = 500
WAIT_S = 30.0
"""How long the other process keeps trying: far beyond the server's bound, far short of forever."""


class Stall:
    """A transaction that does ``step``, then stops (the first time) until :meth:`wake`, then runs a next
    statement and returns what ``step`` returned."""

    def __init__(self, step: Callable[[Any], Any], then: Callable[[Any], Any] | None = None) -> None:
        self._step, self._then = step, then or (lambda c: c.execute("SELECT 1"))
        self._stopped, self._woken = threading.Event(), threading.Event()

    def __call__(self, conn: Any) -> Any:
        got = self._step(conn)
        self._stopped.set()
        self._woken.wait()
        self._then(conn)
        return got

    async def stopped(self) -> None:
        """Wait until the transaction has done ``step`` and stopped."""
        assert await asyncio.to_thread(self._stopped.wait, WAIT_S)

    def wake(self) -> None:
        self._woken.set()


async def _acquired(ledger: Ledger, holder: str, ttl_ms: int) -> Lease | None:
    """Session ``s``'s lease for ``holder``, tried again and again for :data:`WAIT_S` (``None``: never)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            lease = await asyncio.wait_for(ledger.leases.acquire("s", holder, ttl_ms), deadline - time.monotonic())
        except TimeoutError:
            return None
        if lease is not None:
            return lease
        await asyncio.sleep(0.1)
    return None


async def test_a_lease_row_locked_by_a_stalled_transaction_is_taken_over_once_it_expired(postgres_url: str) -> None:
    stalled, other = await Ledger.connect(postgres_url), await Ledger.connect(postgres_url)
    lease = await stalled.leases.acquire("s", "a", TTL_MS)
    assert lease is not None
    # a turn write's fence: the lease row FOR SHARE, then the process stops before its check
    fence = Stall(lambda c: lock_leases_in(c, [], lease), lambda c: check_in(c, lease))
    try:
        writing = asyncio.ensure_future(stalled.database.run_write(fence, row_locks=True))
        await fence.stopped()
        taken = await _acquired(other, "b", 60_000)
        assert taken is not None, "never taken over: the stalled transaction's lock outlived the lease"
        assert (taken.epoch, taken.prior_holder) == (2, "a")
        fence.wake()  # the stalled process goes on: its write finds the lease lost, nothing written
        with pytest.raises(LeaseLostError):
            await writing
    finally:
        fence.wake()
        await stalled.aclose()
        await other.aclose()


async def test_a_first_lease_inserted_by_a_stalled_transaction_does_not_block_another_acquire(
    postgres_url: str,
) -> None:
    stalled, other = await Ledger.connect(postgres_url), await Ledger.connect(postgres_url)
    # the session's first lease: its row inserted, not committed, when the process stops
    first = Stall(lambda c: acquire_in(c, "s", "a", TTL_MS))
    try:
        writing = asyncio.ensure_future(stalled.database.run_write(first))
        await first.stopped()
        taken = await _acquired(other, "b", 60_000)
        assert taken is not None, "never acquired: it waited on the stalled transaction's row"
        assert (taken.holder, taken.epoch) == ("b", 1)
        first.wake()  # the stalled one, run again, finds the session held by the other
        assert await writing is None
    finally:
        first.wake()
        await stalled.aclose()
        await other.aclose()
