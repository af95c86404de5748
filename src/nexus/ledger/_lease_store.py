"""The SQL backends' :class:`~nexus.ledger.protocols.LeaseStore`: one short transaction per call.

The logic is :mod:`nexus.ledger._leases` (shared with the queue's checks); this runs it where the
database's work runs, inline on SQLite (``BEGIN IMMEDIATE``: one writer decides at a time) and on a
worker thread for PostgreSQL (the row read ``FOR UPDATE SKIP LOCKED``).
"""

from __future__ import annotations

from nexus.ledger import _leases
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger.records import Lease


class SqlLeaseStore:
    """Session leases of one SQL ledger database (see docs/scaling.md)."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def acquire(self, session_label: str, holder: str, ttl_ms: int) -> Lease | None:
        """Take the session's lease for ``ttl_ms`` (a new epoch) or renew the caller's own; ``None``: held elsewhere."""
        return await self._db.run_write(lambda c: _leases.acquire_in(c, session_label, holder, ttl_ms))

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend a valid lease by ``ttl_ms`` from now; ``LeaseLostError`` once it expired or was taken over.

        A database that stays busy for a third of ``ttl_ms`` fails the renewal (``LedgerBusyError``): a
        renewal any later could not keep the lease anyway.
        """
        return await self._db.run_write(lambda c: _leases.renew_in(c, lease, ttl_ms), wait_s=ttl_ms / 3000)

    async def release(self, lease: Lease) -> bool:
        """Give the lease up; ``False`` when it was no longer the caller's (nothing changed)."""
        return await self._db.run_write(lambda c: _leases.release_in(c, lease))

    async def get(self, session_label: str) -> Lease | None:
        """The session's lease as stored (``holder`` ``None``: released), or ``None`` if it never had one."""
        return await self._db.run_read(lambda c: _leases.get_in(c, session_label))

    async def expired(self, limit: int = 100) -> list[Lease]:
        """Leases that expired while held (their holder stopped renewing), oldest first, at most ``limit``."""
        return await self._db.run_read(lambda c: _leases.expired_in(c, limit))
