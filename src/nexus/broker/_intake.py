"""The accept half of ``AgentBroker.send``: the durable accept, the row into its session's queue, the cap's drops.

Kept apart from the broker because it is the one part of a send that races the store watcher (the watcher
may load a committed row before the send that wrote it resumes) and the only part that drops messages: a
send marks its message *arriving* until its row is in the session's queue, and the watcher leaves arriving
rows alone (:mod:`nexus.broker._watcher`); a row the watcher got to first anyway is kept where it is. The rows
the cap pushes out are left alone in the same way until their ``dropped`` write ended (``Departures``). What
happens after (the run to steer, the drain to wake) stays in :mod:`nexus.broker.broker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus import telemetry
from nexus.broker._adopt_cap import drop_pushed_out
from nexus.broker._items import duplicate_receipt, queued
from nexus.broker._queue_trace import accept_span, traced_accept
from nexus.broker._slot import AgentSlot, SessionSlot
from nexus.broker.modes import QueueSettings
from nexus.broker.session_queue import AddOutcome, QueuedMessage
from nexus.broker.types import AgentMessage, BrokerError, QueueFullError, SendReceipt, UnknownAgentError
from nexus.ledger import AcceptRequest, AgentRemovedError, QueueItem, QueueItemsFinishedError, QueueStore

if TYPE_CHECKING:
    from nexus.broker._watcher import Departures, StoreWatcher

Accepted = tuple[QueueItem, SessionSlot, QueuedMessage, bool, tuple[str, ...]]
"""A fresh accept: its row, its session, its queue entry, whether the store watcher had adopted it first, and
the ids of the messages the cap pushed out to make room (a plain tuple: one is made for every message)."""


class Intake:
    """Accepts messages into the durable queue and their sessions' queues, applying each session's cap."""

    __slots__ = ("_departures", "_queue", "arriving")

    def __init__(self, queue: QueueStore) -> None:
        self._queue = queue
        self.arriving: set[str] = set()
        """Ids of messages between their accept and their place in a session's queue (the watcher skips them)."""
        self._departures: Departures | None = None

    def watched_by(self, watcher: StoreWatcher) -> None:
        """Have ``watcher`` leave alone the rows of this intake's sends in flight (``arriving``) and of its drops
        whose write it may not see yet (:class:`~nexus.broker._watcher.Departures`)."""
        watcher.arriving = self.arriving.__contains__
        self._departures = watcher.departures

    async def accept(
        self, slot: AgentSlot, message: AgentMessage, request: AcceptRequest, settings: QueueSettings
    ) -> Accepted | SendReceipt:
        """Accept ``message`` (committed with the loop iteration's other accepts and claims) and queue it.

        A duplicate id gets the first accept's receipt; a message the cap refuses raises :class:`BrokerError`
        after its row is settled ``dropped``; one for an agent removed from the registry meanwhile (another
        door: ``nexus agents rm``, the HTTP route) :class:`UnknownAgentError`, nothing stored.
        """
        self.arriving.add(message.id)  # until held below, the store watcher leaves its row to this send
        try:
            try:
                if telemetry.observing():
                    span = accept_span(slot.agent_id, request.session_label, message, settings.mode)
                    row, created = await traced_accept(self._queue, request, span)
                else:  # nothing observed: no span to end, nothing to count (this runs for every message)
                    row, created = await self._queue.accept(request)
            except ValueError as exc:  # the per-sender session's label is taken by another session
                raise BrokerError(f"message {message.id!r} to {slot.agent_id!r} was not queued: {exc}") from None
            except AgentRemovedError as exc:  # removed from the registry (another door) as this was sent
                raise UnknownAgentError(f"message {message.id!r} was not queued: {exc}") from None
            if not created:
                return duplicate_receipt(slot, message, row)
            session = slot.session(row.session_label, message.session)
            queued_message, adopted, outcome = self._enqueue(session, row, settings, message)
        finally:
            self.arriving.discard(message.id)
        pushed_out: tuple[str, ...] = ()
        if outcome is not None and (outcome.dropped or not outcome.accepted):
            await self._cap_applied(slot, session, row, settings, outcome)
            pushed_out = tuple(dropped.message_id for dropped in outcome.dropped)
        return row, session, queued_message, adopted, pushed_out

    @staticmethod
    def _enqueue(
        session: SessionSlot, row: QueueItem, settings: QueueSettings, message: AgentMessage
    ) -> tuple[QueuedMessage, bool, AddOutcome | None]:
        """Add a freshly accepted row to its session's queue (cap and drop policy applied, see :meth:`_cap_applied`);
        ``True``: the store watcher had adopted it already (no outcome). Synchronous: the usual message drops none."""
        fresh = queued(row, debounce_ms=settings.debounce_ms, message=message)
        adopted = session.queue.find(row.id)
        if adopted is not None:  # the store watcher saw the committed row first: same item, keep its place
            session.queue.retune(adopted, fresh.mode, fresh.debounce_ms)
            return adopted, True, None
        return fresh, False, session.queue.add(fresh, settings)

    async def _cap_applied(
        self, slot: AgentSlot, session: SessionSlot, row: QueueItem, settings: QueueSettings, outcome: AddOutcome
    ) -> None:
        """The queue's cap refused the message (dropped, the send fails) or pushed older ones out (dropped)."""
        if not outcome.accepted:
            reason = outcome.rejected_reason or "duplicate"
            refused = outcome.rejected_reason is not None  # the cap, policy `new`: its retry must not be a "duplicate"
            await self.drop([row.id], reason, refused=refused)  # the store watcher may have dropped it already
            error = QueueFullError if refused else BrokerError
            raise error(f"message {row.message_id!r} to {slot.agent_id!r} was not queued: {reason}")
        if outcome.dropped:
            await drop_pushed_out(outcome, settings, self.drop, session.queue)

    async def drop(
        self, item_ids: list[str], reason: str, overflow_cap: int | None = None, *, refused: bool = False
    ) -> list[str]:
        """Settle items the cap pushed out as ``dropped``, leaving those finished meanwhile: a row the store watcher
        loaded again while another send settled it was dropped twice, the store refused the whole move and that
        send failed with a 400 though its own message was queued (``nexus serve`` under load). A row another
        broker claimed meanwhile is left to its run the same way. ``overflow_cap``: the ``summarize`` policy's,
        the drops are owed to the session's next ``[Queue overflow]`` summary. ``refused``: the send is told "not
        queued", so the message id is freed for its retry. Returns the items dropped here.

        Until the write ended the store watcher leaves the rows alone (they read ``queued`` and nobody here holds
        them: loaded back, the cap pushed the newest message out for them)."""
        departures, leaving = self._departures, item_ids
        if departures is not None:  # before the first wait: the queue let them go in this same step
            departures.leaving(leaving)
        try:
            while item_ids:
                try:
                    await self._queue.settle(
                        item_ids, "dropped", reason=reason, overflow_cap=overflow_cap, refused=refused
                    )
                    return item_ids
                except QueueItemsFinishedError as exc:
                    left = [item_id for item_id in item_ids if item_id not in exc.finished]
                    if len(left) == len(item_ids):  # it named none of these: not the race above
                        raise
                    item_ids = left
            return item_ids
        finally:
            if departures is not None:
                departures.left(leaving)
