"""A steer claimed under the session's lease, handed back after the lease was lost, ends quietly.

The fault bench found it: a run stopped taking steers while the claim committed, and by the time the
broker handed the message back the lease had been taken over, so the release raised
``LeaseLostError`` out of the store watcher (a traceback; nothing lost). A real SQLite ledger and real
leases; the store claims for real and then lets another holder take the lease over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from nexus.broker import AgentIdentity
from nexus.broker._slot import AgentSlot
from nexus.broker._steer_in import RunSteerer
from nexus.broker.session_queue import QueuedMessage
from nexus.ledger import AcceptRequest, Lease, Ledger, NewSession, QueueItem, QueueStore

SHORT_MS = 50
"""The time to live the lease is cut to once the claim committed: it runs out, and another broker takes it."""

LONG_MS = 60_000
"""The lease's time to live until then: acquired with :data:`SHORT_MS`, it could run out before the claim made
under it (a loaded machine), and the claim was refused instead of the hand-back."""


class TakenOverAfterClaim:
    """The ledger's queue store; right after a claim commits, the lease is cut short, expires and another broker
    takes it."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self.queue = ledger.queue

    async def claim(
        self, item_ids: Sequence[str], *, lease: Lease | None = None, overflow_of: str | None = None
    ) -> list[tuple[QueueItem, int]] | None:
        owed = await self.queue.claim(item_ids, lease=lease, overflow_of=overflow_of)
        assert lease is not None
        await self._ledger.leases.renew(lease, SHORT_MS)
        for _ in range(200):
            if await self._ledger.leases.acquire(lease.session_label, "other-broker", 60_000) is not None:
                return owed
            await asyncio.sleep(SHORT_MS / 1000)
        raise AssertionError("the lease never expired")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


class StoppedTakingSteers:
    state = "finishing"


async def test_a_steer_handed_back_after_the_lease_was_lost_waits_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        await ledger.sessions.ensure(NewSession("agent:w"))
        item, _ = await ledger.queue.accept(AcceptRequest("w", "agent:w", "m1", "cli", {"content": "x"}, "steer"))
        lease = await ledger.leases.acquire("agent:w", "this-broker", LONG_MS)
        assert lease is not None
        session = AgentSlot(AgentIdentity("w", "agent:w"), {}).session("agent:w")
        session.lease = lease
        queued = QueuedMessage(item.id, "m1", "x", "steer", 0)
        session.queue.restore(queued)
        steerer = RunSteerer(cast(QueueStore, TakenOverAfterClaim(ledger)), set(), None, leased=True)
        run = StoppedTakingSteers()  # not the session's run, and past taking steers: handed back at once

        with caplog.at_level(logging.WARNING, logger="nexus.broker"):
            steered = await steerer._claim(session, queued, cast(Any, run))

        assert steered is False
        assert not queued.in_flight, "it waits in this broker's queue, as after any lost lease"
        assert "lease" in caplog.text and "m1" in caplog.text
        stored = (await ledger.queue.pending(session_label="agent:w"))[0]
        assert stored.id == item.id and stored.status == "processing", "the new holder takes it over"
