"""A message accepted while its session runs: steered into the running turn, or the turn interrupted.

DESIGN §4.6: ``steer`` and ``queue`` hand the message to the running turn at its next safe point
(``queue`` alone, ``steer`` with the others waiting), ``steer-backlog`` steers it and keeps its own
turn too, ``interrupt`` aborts the turn (the message runs next). A message steered in is claimed
first (held in flight meanwhile, so no batch takes it twice) and then follows the run it went into:
its sender's receipt gets the run, its reply target the rest of the reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Container
from typing import TYPE_CHECKING

from nexus.broker._items import message_source
from nexus.broker._slot import SessionSlot, SteerInFlight
from nexus.ledger import LedgerError

if TYPE_CHECKING:
    from nexus.broker._batch_runner import Deliver
    from nexus.broker.modes import QueueMode
    from nexus.broker.session_queue import QueuedMessage
    from nexus.engine import Execution
    from nexus.ledger import Lease, QueueStore

log = logging.getLogger("nexus.broker")

_STEERABLE = ("streaming", "tools")
"""A run takes a steer while it streams or runs tools; starting, compacting or finishing, the message waits."""


class RunSteerer:
    """Acts on a session's running turn for the modes that do (see the module docstring)."""

    def __init__(self, queue: QueueStore, agents: Container[str], deliver: Deliver | None, *, leased: bool) -> None:
        """``agents``: the broker's registry (a sender that is an agent is stored as ``agent:<id>``);
        ``deliver`` the broker's deliverer of reply targets; ``leased``: batches run under session leases."""
        self._queue = queue
        self._agents = agents
        self._deliver = deliver
        self._leased = leased

    async def deliver_to_run(self, session: SessionSlot, queued_message: QueuedMessage, mode: QueueMode) -> bool:
        """Act on the session's active run for the modes that do (steer, steer-backlog, queue, interrupt)."""
        run = session.run
        if run is None:
            return self.no_run(session, mode)
        if mode == "interrupt":
            run.abort(f"interrupted by message {queued_message.message_id}")
            return False
        if mode not in ("steer", "steer-backlog", "queue") or run.state not in _STEERABLE:
            return False  # not steerable now: it waits for its own turn (followup)
        source = message_source(queued_message.sender, self._agents)
        if mode == "steer-backlog":  # the item also keeps its own turn
            run.steer(queued_message.prompt, source=source)
            return True
        if not await self._claim(session, queued_message, run):
            return False
        receipt = run.steer(
            queued_message.prompt, id=queued_message.item_id, mode="one" if mode == "queue" else "all", source=source
        )
        session.steers.append(SteerInFlight(queued_message.item_id, receipt))
        self._hand(session, queued_message, run)
        return True

    @staticmethod
    def no_run(session: SessionSlot, mode: QueueMode) -> bool:
        """:meth:`deliver_to_run` for a session without a run (``False``: nothing was steered)."""
        session.interrupted = session.interrupted or mode == "interrupt"  # a batch being claimed: it yields
        return False

    async def _claim(self, session: SessionSlot, item: QueuedMessage, run: Execution) -> bool:
        """Claim a message to steer into ``run`` (held in flight meanwhile, so no batch takes it); ``False``:
        it waits for its own turn (a claim that failed, or a run that stopped taking steers meanwhile)."""
        claimed = session.claiming[item.item_id] = asyncio.get_running_loop().create_future()
        ok = False
        try:
            ok = await self._claimed(session, item, run)
        finally:
            del session.claiming[item.item_id]
            claimed.set_result(ok)
        return ok

    async def _claimed(self, session: SessionSlot, item: QueuedMessage, run: Execution) -> bool:
        session.queue.mark_in_flight([item.item_id])
        lease = session.lease  # under leases, a steer is claimed under the run's (none held: it waits its turn)
        try:
            if self._leased and lease is None:
                raise LedgerError("the session's lease is not held here")
            await self._queue.claim([item.item_id], lease=lease)
        except LedgerError as exc:  # a full or locked disk, or finished meanwhile (its batch's claim skips it)
            session.queue.release([item.item_id])
            log.warning("message %s was not steered (it waits for its turn): %s", item.message_id, exc)
            return False
        if session.run is not run or run.state not in _STEERABLE:  # the claim's commit took a loop iteration
            await self._hand_back(session, item, lease)
            return False
        return True

    async def _hand_back(self, session: SessionSlot, item: QueuedMessage, lease: Lease | None) -> None:
        """Release a claimed message the run no longer takes. A lease lost meanwhile leaves its row claimed at
        the old epoch: the session's new holder takes it over (as with any lost lease); here it only waits."""
        try:
            await self._queue.release([item.item_id], lease=lease)
        except LedgerError as exc:
            log.warning("message %s was not steered and not handed back here (it waits): %s", item.message_id, exc)
        session.queue.release([item.item_id])

    def _hand(self, session: SessionSlot, item: QueuedMessage, run: Execution) -> None:
        """A message steered into ``run`` follows it: its sender gets the run, its reply target the rest of it."""
        if item.ticket is not None:
            item.ticket.hand(run)
        target = item.deliver_to
        if target is not None and self._deliver is not None and str(target) not in session.delivering:
            session.delivering.add(str(target))
            self._deliver(run, target, item.item_id)


def steered(session: SessionSlot, item_id: str) -> bool:
    """Whether the message ``item_id`` was steered into the session's running turn."""
    return any(steer.item_id == item_id for steer in session.steers)
