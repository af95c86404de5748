"""The broker's side of session leases: take a session's lease before its batch, keep it while the run goes on.

Several brokers may drain one database (docs/scaling.md). Before a batch a broker takes the session's
lease (:class:`~nexus.ledger.protocols.LeaseStore`); a session another broker holds is skipped and looked
at again later. While the run goes on the lease is renewed every third of its time to live; a renewal
that finds the lease taken over, or that cannot succeed before it would have expired, aborts the run,
and the ledger refuses whatever that run still tries to write (its claim's epoch is stale). Between
batches of a busy session the lease is kept (the next claim checks it anyway); it is released when the
session has nothing more to run here.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from nexus.ledger import LeaseLostError, LedgerError

if TYPE_CHECKING:
    from nexus.broker._slot import SessionSlot
    from nexus.ledger import Lease, LeaseStore, Ledger, TurnStore

log = logging.getLogger("nexus.broker")

DEFAULT_TTL_MS = 15_000
"""How long a lease holds without renewal: a dead broker's sessions are taken over this long after it died."""


def holder_name() -> str:
    """A name for this broker as a lease holder: the process (as claims name it) and a tag of its own, so
    two brokers of one process (tests, embedding) are two holders."""
    from nexus.ledger import claimant, new_ulid

    return f"{claimant()} #{new_ulid()[-8:].lower()}"


def parked_delay_s(ttl_ms: int) -> float:
    """How long a session another broker holds waits before it is looked at again: jittered, so brokers
    started together do not ask in step, and well inside the lease's time to live."""
    return min(1.0, ttl_ms / 4000) * random.uniform(0.5, 1.5)


class KeptLease:
    """A lease kept for one run (:meth:`SessionLeases.keep`): calling it says whether the run may still speak.

    Its events are shown while the lease is known to hold: until ``valid_until`` (when the last acquire or
    renewal was *sent*, plus the time to live) and not lost. A process paused past that (SIGSTOP, a frozen
    VM) may have been taken over; its run's events wait until a renewal says otherwise
    (``Execution.events_shown``).
    """

    __slots__ = ("lost", "task", "valid_until")

    def __init__(self, valid_until: float) -> None:
        self.valid_until = valid_until
        self.lost = False
        self.task: asyncio.Task[None] | None = None

    def __call__(self) -> bool:
        return not self.lost and time.monotonic() < self.valid_until

    def cancel(self) -> None:
        """Stop renewing (the run ended)."""
        if self.task is not None:
            self.task.cancel()


class SessionLeases:
    """Takes, keeps and lets go of session leases for one broker (see the module docstring)."""

    def __init__(self, store: LeaseStore, turns: TurnStore, *, ttl_ms: int = DEFAULT_TTL_MS) -> None:
        self._store = store
        self._turns = turns
        self.ttl_ms = ttl_ms
        self.holder = holder_name()
        self.on_takeover: Callable[[str, str], object] | None = None
        """``(session_label, prior_holder)`` once per takeover: the server tells the session's event streams."""

    async def take(self, session: SessionSlot) -> Lease | None:
        """The session's lease for a batch (the one held since the last batch if still fresh); ``None``: held elsewhere.

        A takeover from a holder whose lease expired closes the open turn that holder's run left (as a
        crash leaves it), before anything reads the session's head. So does a new tenure after a run here
        lost the lease (``session.lease_lost``): the store names no prior holder when the lapsed lease was
        this broker's own, yet the lost run's opened turn is still open. Left open, the next run forked
        from the head beside it, and a later takeover closed it as a side branch off the chain (the fault
        test at load: a renewal kept busy past the time to live, the same broker acquiring again).
        """
        asked = time.monotonic()
        if session.lease is not None and asked < session.lease_fresh_until:
            return session.lease
        lease = await self._store.acquire(session.label, self.holder, self.ttl_ms)
        self._hold(session, lease, asked)
        if lease is not None and lease.prior_holder is not None:
            log.warning("session %s: taking over from %s (its lease expired)", session.label, lease.prior_holder)
            await self._recover(session)
            if self.on_takeover is not None:
                self.on_takeover(session.label, lease.prior_holder)
        elif lease is not None and session.lease_lost:
            await self._recover(session)
        return lease

    async def _recover(self, session: SessionSlot) -> None:
        """Close the session's open turns (left by a run that lost the lease, here or elsewhere) as ``aborted``."""
        await self._turns.recover(force=True, session=session.label)
        session.lease_lost = False

    def _hold(self, session: SessionSlot, lease: Lease | None, asked: float = 0.0) -> None:
        """Remember ``lease`` (``None``: none held), acquired or renewed by a request sent at ``asked``."""
        session.lease = lease
        session.lease_fresh_until = time.monotonic() + self.ttl_ms / 3000 if lease is not None else 0.0
        session.lease_valid_until = asked + self.ttl_ms / 1000 if lease is not None else 0.0

    def keep(self, session: SessionSlot, lease: Lease, on_lost: Callable[[str], None]) -> KeptLease:
        """Renew ``lease`` every third of its time to live until cancelled; ``on_lost(why)`` once it is lost
        (taken over, or no renewal got through before it expired)."""
        kept = KeptLease(session.lease_valid_until)
        kept.task = asyncio.get_running_loop().create_task(
            self._renew(session, lease, on_lost, kept), name="broker:lease"
        )
        return kept

    async def _renew(self, session: SessionSlot, lease: Lease, on_lost: Callable[[str], None], kept: KeptLease) -> None:
        deadline = time.monotonic() + self.ttl_ms / 1000  # renewed just now (take/claim checked it)
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            asked = time.monotonic()
            try:
                lease = await self._store.renew(lease, self.ttl_ms)
            except LeaseLostError as exc:
                self._lost(session, on_lost, kept, str(exc))
                return
            except LedgerError as exc:  # the database is busy or away: try again while the lease may still hold
                if time.monotonic() >= deadline:
                    self._lost(session, on_lost, kept, f"no renewal got through before it expired ({exc})")
                    return
                log.warning("session %s: renewing its lease failed (%s); trying again", session.label, exc)
                continue
            deadline = time.monotonic() + self.ttl_ms / 1000
            self._hold(session, lease, asked)
            kept.valid_until = session.lease_valid_until

    def _lost(self, session: SessionSlot, on_lost: Callable[[str], None], kept: KeptLease, why: str) -> None:
        kept.lost = True
        self.forget(session)
        on_lost(why)

    def forget(self, session: SessionSlot) -> None:
        """Drop the session's lease from memory (it was lost: the next batch must acquire anew, and recover
        the turn the lost run may have left open)."""
        self._hold(session, None)
        session.lease_lost = True

    async def let_go(self, session: SessionSlot) -> None:
        """Release the session's lease (nothing more to run here): another broker may take it at once."""
        lease = session.lease
        self._hold(session, None)
        if lease is None:
            return
        try:
            await self._store.release(lease)
        except LedgerError as exc:  # it expires on its own
            log.warning("session %s: releasing its lease failed (%s); it expires in %d ms", session.label, exc,
                        self.ttl_ms)  # fmt: skip


def session_leases(ledger: Ledger, enabled: bool | None, ttl_ms: int) -> SessionLeases | None:
    """The broker's leases on ``ledger``: on a database other processes reach (PostgreSQL) unless ``enabled``
    is False; on SQLite (one broker per file, its lock) only when ``enabled`` is True."""
    store = getattr(ledger, "leases", None)
    use = enabled if enabled is not None else not ledger.database.inline
    if not use:
        return None
    if store is None:
        raise ValueError(f"the ledger {ledger.path} has no lease store; set `leases = false` in [broker]")
    return SessionLeases(store, ledger.turns, ttl_ms=ttl_ms)
