"""Taking over a dead broker's sessions: the sweep for leases that expired while held.

A broker that dies (SIGKILL, a lost machine) stops renewing its sessions' leases; their items stay
``processing`` under its claim, and the other brokers may never have seen them (a message is adopted
from the store only while it waits). Every half lease, jittered, each broker lists the leases that
expired while held and loads those sessions' unfinished items; its scheduler then takes the lease
(epoch + 1, the dead run's open turn closed as ``aborted``), and the claim takes the items over, one
more attempt each: an item already cut ``max_attempts`` times fails instead. A session left with
nothing to run has its stale lease cleared (taken and released), so it is not listed again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from nexus.broker._slot import AgentSlot, SessionSlot
from nexus.ledger import QueueItem

if TYPE_CHECKING:
    from nexus.broker._leases import SessionLeases
    from nexus.ledger import LeaseStore, QueueStore

log = logging.getLogger("nexus.broker")

SlotFor = Callable[[str], Awaitable[AgentSlot | None]]
Load = Callable[[AgentSlot, QueueItem], Awaitable[SessionSlot | None]]
Held = Callable[[str, str, str], bool]


class Takeover:
    """Loads the work of sessions whose holder died (see the module docstring)."""

    def __init__(
        self,
        leases: SessionLeases,
        store: LeaseStore,
        queue: QueueStore,
        max_attempts: int,
        slot_for: SlotFor,
        load: Load,
        held: Held,
        wake: Callable[[AgentSlot, SessionSlot], None],
    ) -> None:
        self._leases = leases
        self._store = store
        self._queue = queue
        self._max_attempts = max_attempts
        self._slot_for = slot_for
        self._load = load
        self._held = held
        self._wake = wake

    async def sweep(self) -> int:
        """Load the unfinished items of every session whose lease expired while held; returns how many."""
        expired = await self._store.expired()
        if not expired:
            return 0
        await self._fail_exhausted()
        loaded = 0
        for lease in expired:
            items = await self._queue.pending(session_label=lease.session_label)
            if not items:
                await self._clear(lease.session_label)
                continue
            for item in items:
                loaded += await self._adopt(item)
        return loaded

    async def reload(self, session_label: str) -> int:
        """Load the unfinished items of a session this broker just took over from a dead holder; returns how many.

        The items that holder had claimed were never adopted here (adoption sees waiting items only), and
        the sweep no longer lists the session once this broker's acquire renewed its lease: without this,
        the takeover ran the later messages first and left the cut one to nobody (the fault bench).
        """
        await self._fail_exhausted()  # its cut items at their last attempt fail here too, not run a fourth time
        loaded = 0
        for item in await self._queue.pending(session_label=session_label):
            loaded += await self._adopt(item)
        return loaded

    async def _fail_exhausted(self) -> None:
        failed = await self._queue.fail_exhausted(self._max_attempts)
        if failed:
            log.warning("failed %d queue items whose runs were cut %d times", len(failed), self._max_attempts)

    async def _adopt(self, item: QueueItem) -> int:
        """Queue one of the dead holder's items here (once), and have its session looked at now."""
        agent_id = item.agent_id or ""
        if self._held(agent_id, item.session_label, item.id):
            return 0
        slot = await self._slot_for(agent_id)
        session = await self._load(slot, item) if slot is not None else None
        if slot is None or session is None:
            return 0
        session.idle.clear()
        self._wake(slot, session)
        return 1

    async def _clear(self, session_label: str) -> None:
        """A stale lease over nothing to run: take it and give it up, so the sweep stops listing it."""
        lease = await self._store.acquire(session_label, self._leases.holder, self._leases.ttl_ms)
        if lease is not None:
            await self._store.release(lease)
