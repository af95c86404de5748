"""The store watcher: a running broker adopts the messages other processes queued for it.

``nexus send`` while a server or a drain holds the broker lock writes its message straight into
``queue_items``; the process that drains looks every :data:`WATCH_INTERVAL_S` for rows committed
after the last one it saw and puts them in their session's queue (each once — a row this process
accepted itself and already holds is recognised by its item id, one it is still queueing or has just
dropped is left alone: :attr:`StoreWatcher.arriving`, :class:`Departures`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from nexus.broker._slot import AgentSlot, SessionSlot
from nexus.ledger import QueueItem

if TYPE_CHECKING:
    from nexus.ledger import Ledger, QueueListener

log = logging.getLogger("nexus.broker")

WATCH_INTERVAL_S = 0.25
"""How often a running broker looks for messages that other processes queued (jittered by ±50 %, so
brokers started together do not look in step)."""


class Departures:
    """Rows this broker took out of its sessions' queues whose ``dropped`` write a look may not have seen yet.

    The cap takes a message out of its queue at once and writes its row ``dropped`` after: a look whose read came
    in between (on PostgreSQL, one whose snapshot was older than that write) found the row ``queued`` and held by
    nobody here, as another process's new message would be, and loaded it back; under the cap it then pushed the
    newest message out in its turn (the agent was told of 3 dropped messages where 2 were). An id is kept while
    its write is on its way, and after it only while a look begun before the write ended is still going: a look
    begun later reads the row as it is now. So it holds the drops of a moment, not a history."""

    __slots__ = ("_left_at", "_looking", "_looks")

    def __init__(self) -> None:
        self._looks = 0
        self._looking: set[int] = set()
        self._left_at: dict[str, int | None] = {}
        """Item id: the newest look begun when its write ended (``None``: it has not ended)."""

    def leaving(self, item_ids: Iterable[str]) -> None:
        """These items have left their queue; the write that settles their rows is on its way."""
        for item_id in item_ids:
            self._left_at[item_id] = None

    def left(self, item_ids: Iterable[str]) -> None:
        """Their write ended (committed; or failed, and then, as before, the row waits for a restart)."""
        for item_id in item_ids:
            if self._looking:
                self._left_at[item_id] = self._looks
            else:  # no look going: every later one reads the row as written
                self._left_at.pop(item_id, None)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._left_at

    def look(self) -> int:
        """A look begins: its number, for :meth:`looked`."""
        self._looks += 1
        self._looking.add(self._looks)
        return self._looks

    def looked(self, look: int) -> None:
        """Look ``look`` ended: forget the items whose write ended before every look still going began."""
        self._looking.discard(look)
        if self._left_at:
            oldest = min(self._looking, default=self._looks + 1)
            self._left_at = {key: at for key, at in self._left_at.items() if at is None or at >= oldest}


class StoreWatcher:
    """Adopts other processes' queued rows into the broker's in-memory queues."""

    def __init__(
        self,
        ledger: Ledger,
        slots: dict[str, AgentSlot],
        load: Callable[[AgentSlot, QueueItem], Awaitable[SessionSlot | None]],
        adopted: Callable[[AgentSlot, SessionSlot], Awaitable[None]],
    ) -> None:
        """``slots`` is the broker's registry (shared: agents registered meanwhile are added to it);
        ``load`` queues one stored row in its session; ``adopted`` drains the session (and acts on its run)."""
        self._queue = ledger.queue
        self._agents = ledger.agents
        self._slots = slots
        self._load = load
        self._adopted = adopted
        self._seen_rowid = 0
        self._task: asyncio.Task[None] | None = None
        self.sweep: Callable[[], Awaitable[object]] | None = None
        """Run every :attr:`sweep_every_s` (jittered) besides the looks: the takeover of dead brokers' sessions."""
        self.sweep_every_s = 5.0
        self.interval_s = WATCH_INTERVAL_S
        """The time between two looks (jittered by ±50 %); a wake-up makes the next look happen at once."""
        self._woken = False
        self._waiter: asyncio.Future[None] | None = None
        self._listening: asyncio.Task[None] | None = None
        self.arriving: Callable[[str], bool] | None = None
        """``arriving(message_id)``: a message this broker's own ``send`` is queueing (committed, not yet held).
        Its row is left to that send: adopted here too, every look of a broker behind on its sends loaded
        the last group of its own accepts a second time (~13 % of messages at 13,000/s)."""
        self.departures = Departures()
        """Rows this broker dropped that a look may still read as ``queued`` (the broker's drops record them)."""

    async def mark_seen(self) -> None:
        """Everything stored so far is the broker's own to load (at start): adopt only later rows."""
        self._seen_rowid = await self._queue.cursor()

    def start(self, listener: QueueListener | None = None, wake_session: Callable[[str], None] | None = None) -> None:
        """Begin looking (a task on the running loop) until :meth:`stop`; with a ``listener`` (PostgreSQL), each
        notification makes the next look happen now and wakes the session it names (``wake_session``)."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._watch(), name="broker:watch")
        if listener is not None:

            def woken(session_label: str) -> None:
                self._woken = True
                if self._waiter is not None:
                    _resolve(self._waiter)
                if session_label and wake_session is not None:
                    wake_session(session_label)

            self._listening = loop.create_task(listener.listen(woken), name="broker:listen")

    def stop(self) -> None:
        """Stop looking (and listening)."""
        for task in (self._task, self._listening):
            if task is not None:
                task.cancel()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        sweep_at = loop.time() + self.sweep_every_s * random.uniform(0.5, 1.0)
        while True:
            await self._pause(self.interval_s * random.uniform(0.5, 1.5))
            try:
                await self.adopt()
                if self.sweep is not None and loop.time() >= sweep_at:
                    sweep_at = loop.time() + self.sweep_every_s * random.uniform(0.5, 1.5)
                    await self.sweep()
            except Exception:  # e.g. a full or locked disk: look again next time (an error ended the watch
                log.exception("looking for messages other processes queued failed; trying again")  # for good)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less if a wake-up comes (one that came during the last look ends it at once).

        A future and a timer, not ``wait_for``: no task per pause (an idle broker keeps no extra task)."""
        if self._woken:
            self._woken = False
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(seconds, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
            self._woken = False

    async def adopt(self) -> None:
        """Queue in memory what other processes accepted since the last look (each item once).

        The last look moves on only once every row is queued: after a failure the rows are read
        again, and those already queued are recognised as held.
        """
        departures = self.departures
        look = departures.look()
        try:
            items, newest = await self._queue.queued_after(self._seen_rowid, self.held, self.arriving)
            for item in items:
                if item.id in departures:  # dropped here, its write too late for this look's read (checked here,
                    continue  # on the loop: the read's ``held`` may run on a thread, between a drop and its record)
                slot = await self.slot_for(item.agent_id or "")
                if slot is None:
                    continue
                session = await self._load(slot, item)
                if session is None:
                    continue
                session.idle.clear()
                await self._adopted(slot, session)
            self._seen_rowid = newest
        finally:
            departures.looked(look)

    def held(self, agent_id: str, session_label: str, item_id: str) -> bool:
        """Whether this broker already holds the item in memory (accepted by itself, or adopted before)."""
        slot = self._slots.get(agent_id)
        known = slot.sessions.get(session_label) if slot is not None else None
        return known is not None and known.queue.find(item_id) is not None

    async def slot_for(self, agent_id: str) -> AgentSlot | None:
        """The slot of an agent named by another process's message (registered there meanwhile, maybe)."""
        slot = self._slots.get(agent_id)
        if slot is not None:
            return slot
        agent = await self._agents.get(agent_id)
        if agent is None:
            return None
        from nexus.broker.types import stored_agent

        identity, spec = stored_agent(agent)
        slot = self._slots[agent_id] = AgentSlot(identity, spec=spec)
        return slot


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
