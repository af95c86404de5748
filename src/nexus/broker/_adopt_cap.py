"""Rows other processes queued, adopted under the queue's cap and drop policy.

``nexus send`` while another process holds the broker lock writes its message straight into the queue
table; the holder's store watcher adopts it. Adopted with :meth:`SessionQueue.restore` (no cap), five
follow-ups sent that way all ran under ``cap = 2``, while the same five sent to ``nexus serve`` over HTTP
(``Broker.send``: :meth:`SessionQueue.add`) dropped three and started the next turn with the
``[Queue overflow]`` summary. The cap belongs to the queue, not to the door a message came through, so
an adopted row goes through :meth:`SessionQueue.add` too. Rows loaded when a broker starts, or taken
over from a dead broker, are restored as they are: they were accepted under the cap (a run may have
held some of them), and dropping them at a restart would lose messages a cut run still owes.

Not under leases (several brokers on one PostgreSQL database): there every broker adopts the rows of
sessions others run, and keeps in memory messages another broker has already run (its claim is refused
later, docs/scaling.md). Counted against the cap, that stale view would drop messages the running broker
still holds; each broker applies the cap to what it accepts itself (``Broker.send``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from nexus.broker._items import queued, session_key_of
from nexus.broker._slot import AgentSlot, SessionSlot, settle
from nexus.broker.modes import QueueOverrides, QueueSettings, resolve_settings
from nexus.broker.types import SendAndWaitResult

if TYPE_CHECKING:
    from nexus.broker.session_queue import AddOutcome, QueuedMessage, SessionQueue
    from nexus.broker.settings import BrokerSettings
    from nexus.ledger import QueueItem

Load = Callable[[AgentSlot, "QueueItem"], Awaitable[SessionSlot | None]]
Drop = Callable[[list[str], str, "int | None"], Awaitable[list[str]]]
"""``drop(item_ids, reason, overflow_cap)`` settles rows as ``dropped``; with the ``summarize`` policy's cap, owed to
the session's next ``[Queue overflow]`` summary (marked in the ledger, in the same write). Returns those dropped:
not the rows finished or claimed by another broker meanwhile."""


class CappedAdoption:
    """The store watcher's loader: the broker's ``load`` with the session queue's cap applied."""

    __slots__ = ("_drop", "_load", "_settings", "capped")

    def __init__(self, load: Load, settings: BrokerSettings, drop: Drop) -> None:
        """``load`` queues a row as it is (and fails an unreadable one); ``drop`` settles rows as ``dropped``."""
        self._load, self._settings, self._drop = load, settings, drop
        self.capped = True
        """``False``: rows are queued as they are (several brokers share the queues under leases)."""

    async def load(self, slot: AgentSlot, item: QueueItem) -> SessionSlot | None:
        """Queue ``item`` in its session as ``Broker.send`` would: over the cap, the ``new`` policy drops it,
        ``old`` / ``summarize`` drop the oldest waiting ones. ``None``: not queued (held already, dropped)."""
        if not self.capped:
            return await self._load(slot, item)
        session = slot.session(item.session_label, session_key_of(item))
        if session.queue.find(item.id) is not None:
            return None
        try:
            message = queued(item, max_attempts=self._settings.max_attempts)
        except (ValueError, TypeError, KeyError):
            return await self._load(slot, item)  # fails it, saying why
        settings = resolve_settings(QueueOverrides(mode=message.mode), slot.overrides, default=self._settings.queue)
        outcome = session.queue.add(message, settings)
        if outcome.duplicate_of is not None:  # a twin of a held row: queued as before (restore has no dedupe)
            session.queue.restore(message)
        elif not outcome.accepted:
            await self._drop([item.id], outcome.rejected_reason or "the queue is full", None)
            return None
        elif outcome.dropped:
            await drop_pushed_out(outcome, settings, self._drop, session.queue)
        return session


async def drop_pushed_out(outcome: AddOutcome, settings: QueueSettings, drop: Drop, queue: SessionQueue) -> None:
    """Settle the messages the cap pushed out of ``queue`` (``outcome.dropped``) as ``dropped``, and tell their
    senders; ``Broker.send`` and the adoption of another process's rows share it.

    Under ``summarize`` the drops are marked in the ledger as owed to the session's next summary, and the queue
    is told to look there once that write committed (a batch that looked before it would miss them)."""
    reason = f"queue cap {settings.cap} reached (drop policy {settings.drop_policy})"
    owed = settings.cap if settings.drop_policy == "summarize" else None
    dropped = await drop_and_tell(outcome.dropped, reason, owed, drop, "dropped: the agent's queue was full")
    if owed is not None and dropped:
        queue.overflow_owed = True


async def drop_and_tell(items: Sequence[QueuedMessage], reason: str, owed: int | None, drop: Drop, told: str) -> int:
    """Settle ``items`` (taken out of a session's queue) as ``dropped`` and tell their senders ``told``; how many
    were dropped. A row another broker claimed (or finished) meanwhile is not dropped: its outcome is that
    broker's (``nexus queue list --all`` shows it), and its sender here is told so."""
    done = set(await drop([item.item_id for item in items], reason, owed))
    settle([item for item in items if item.item_id in done], SendAndWaitResult(False, error=told))
    settle([item for item in items if item.item_id not in done], _ELSEWHERE)
    return len(done)


_ELSEWHERE = SendAndWaitResult(False, error="the message was finished or taken by another process")
