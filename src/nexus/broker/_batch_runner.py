"""One batch of a session, from its claim to its settlement: run it, then account for every item.

The scheduler hands a session's next batch to :meth:`BatchRunner.run` on a worker. The batch's
items are claimed (an item finished elsewhere is skipped, never run again), run as one turn through
``Runtime.start`` — the :class:`~nexus.engine.Execution` is handed to each item's sender (its
receipt) and to the deliverer of the batch's reply target before the run does anything — and
settled by how the run ended: consumed by the turn, back in the queue in their place (a run aborted
before it wrote a turn, a steer the run handed back), or failed with the reason (a run that could
not start). Whoever accepted a message owns it until it is delivered or handed back; this is where
the broker keeps that promise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Container, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from nexus import telemetry
from nexus.broker._items import error_text, message_source
from nexus.broker._leases import SessionLeases, parked_delay_s
from nexus.broker._queue_trace import claimed
from nexus.broker._scheduler import SessionHeldElsewhere
from nexus.broker._slot import AgentSlot, SessionSlot, settle
from nexus.broker.agent_tools import CallerContext, conversation_started
from nexus.broker.session_queue import Batch, QueuedMessage, owed_summary
from nexus.broker.types import SendAndWaitResult
from nexus.errors import NexusError
from nexus.ledger import (
    LeaseLostError,
    LedgerBusyError,
    LedgerFullError,
    QueueItemsFinishedError,
    QueueItemsHeldError,
    TurnNotSavedError,
)

if TYPE_CHECKING:
    from nexus.agent import AgentTool
    from nexus.engine import AgentResult, Execution, Runtime
    from nexus.ledger import Lease, QueueItem, QueueStore

log = logging.getLogger("nexus.broker")

AnswerAskers = Callable[[str, Sequence[QueuedMessage], "AgentResult"], Awaitable[None]]
"""Send a turn's reply back to the agents that asked without waiting (:meth:`ReplySender.answer_askers`):
for every message the turn consumed, its batch and the steers it read."""

Deliver = Callable[["Execution", dict[str, object], str], object]
"""Stream a run's reply to a stored reply target (``metadata.deliver_to``), recorded with the consumed
queue item: the host's :class:`~nexus.streaming.Deliverer`."""


class BatchRunner:
    """Runs one claimed batch of a session and settles its items (see the module docstring)."""

    def __init__(
        self,
        queue: QueueStore,
        runtime: Runtime,
        agents: Container[str],
        tools: Callable[[CallerContext], list[AgentTool]],
        answer_askers: AnswerAskers,
        closing: Callable[[], bool],
        now_ms: Callable[[], int],
    ) -> None:
        """``agents`` is the broker's registry (a sender that is an agent is stored as ``agent:<id>``);
        ``tools(caller)`` the agent tools of a turn; ``closing()`` says the broker is shutting down (a
        batch claimed meanwhile does not start)."""
        self._queue = queue
        self._runtime = runtime
        self._agents = agents
        self._tools = tools
        self._answer_askers = answer_askers
        self._closing = closing
        self._now_ms = now_ms
        self.deliver: Deliver | None = None
        self.max_hops = 8
        self.reload: Callable[[str], Awaitable[int]] | None = None
        """Under leases: loads a taken-over session's unfinished items (``Takeover.reload``)."""
        self.leases: SessionLeases | None = None
        """Set when brokers share the database: each batch runs under its session's lease (docs/scaling.md)."""

    def run(self, slot: AgentSlot, session: SessionSlot, batch: Batch) -> Awaitable[None]:
        """Claim, run and settle ``batch`` of ``session`` (the session's run is set while it runs).

        Under leases, :class:`SessionHeldElsewhere` says another broker runs the session now (the batch
        waits in memory), and a run whose lease is lost writes nothing more: its items stay queued here.
        Without them no lease is lost: the run's own coroutine is the step (one frame less at each wait).
        """
        if self.leases is None:
            return self._settled_run(slot, session, batch, None)
        return self._leased_run(slot, session, batch)

    async def _leased_run(self, slot: AgentSlot, session: SessionSlot, batch: Batch) -> None:
        lease = await self._lease(session, batch)
        try:
            await self._settled_run(slot, session, batch, lease)
        except LeaseLostError as exc:
            log.warning("agent %s: %s; its messages are left to the session's new holder", slot.agent_id, exc)
            self._drop_claim(session, batch)
        if lease is not None and self.leases is not None:
            # A steer still being claimed under this lease may be handed back: that needs the lease. Let go
            # first, and the message stayed claimed at the old epoch, unseen by the next holder (it ran late,
            # after later ones: the fault bench). Once settled, a handed-back steer keeps the lease here.
            if session.claiming:
                await asyncio.gather(*session.claiming.values())
            ready_at = session.queue.ready_at()
            if session.lease is not None and (ready_at is None or ready_at > self._now_ms() or self._closing()):
                await self.leases.let_go(session)  # nothing more to run here now: another broker may

    async def _lease(self, session: SessionSlot, batch: Batch) -> Lease | None:
        """The session's lease for the batch (``None``: leases are off); held elsewhere: the batch waits."""
        if self.leases is None:
            return None
        lease = await self.leases.take(session)
        if lease is None:
            session.queue.release(batch.item_ids)
            raise SessionHeldElsewhere(parked_delay_s(self.leases.ttl_ms))
        if lease.prior_holder is not None and self.reload is not None:  # taken over from a dead holder: its
            session.lease = dataclasses.replace(lease, prior_holder=None)  # cut items come in (once), in arrival
            session.queue.release(batch.item_ids)  # order, and the next batch (the lease kept) starts from them
            await self.reload(session.label)
            raise SessionHeldElsewhere(0.0)
        return lease

    def _drop_claim(self, session: SessionSlot, batch: Batch) -> None:
        """The lease was lost: forget the claim in memory only (the store belongs to the new holder now).

        The items stay queued here (if the new holder dies too, they run again); a sender keeps waiting.
        """
        session.run = None
        if self.leases is not None:
            self.leases.forget(session)
        steered = [steer.item_id for steer in session.steers]
        session.steers.clear()
        session.queue.release([*batch.item_ids, *steered])

    async def _settled_run(self, slot: AgentSlot, session: SessionSlot, batch: Batch, lease: Lease | None) -> None:
        item_ids = batch.item_ids
        session.interrupted = False
        # A summary may be owed (a drop here, or a new tenure under leases: another broker's drops): the claim takes
        # it in its own transaction. Asked for once: cleared before the claim (a drop while it commits asks again),
        # and asked again when these items do not run now (their retry tells it: they carry it in the ledger).
        owes = session.queue.overflow_owed or (lease is not None and lease.epoch != session.overflow_epoch)
        if owes:
            session.queue.overflow_owed = False
            session.overflow_epoch = lease.epoch if lease is not None else None
        try:
            owed = await self._queue.claim(item_ids, lease=lease, overflow_of=session.label if owes else None)
        except QueueItemsFinishedError as exc:  # an item finished elsewhere: never run it again, keep draining
            session.queue.overflow_owed |= owes
            self._skip_finished(slot, session, batch, exc)
            return
        except BaseException:
            session.queue.overflow_owed |= owes
            raise
        if self._closing() or session.interrupted:  # close() or an interrupt came as the claim committed: they
            session.queue.overflow_owed |= owes  # found no run to abort, so none starts (close waited for a whole
            await self._return_items(session, item_ids, lease)  # turn; the interrupt ran after it). The
            return  # interrupt's batch takes these
        if owed:
            batch = self._with_owed_overflow(session, batch, owed)
        try:
            result, trace = await self._run(slot, session, batch, item_ids, lease)
        except (LeaseLostError, *_UNWRITTEN):  # the unwritten: the scheduler tries the batch again in a second
            session.run = None
            raise
        except Exception as exc:  # a bug (not a run that failed): the items go back, the error is kept
            log.exception("the run of %s (session %s) could not run", slot.agent_id, session.label)
            session.run = None
            await self._return_items(session, item_ids, lease)
            settle(batch.items, SendAndWaitResult(False, error=f"the run could not start: {exc}"))
            await asyncio.sleep(0.1)
            return
        session.run = None
        slot.last_activity_ms = self._now_ms()
        if result.turn_id is None and result.status != "completed":
            failed = await self._settle_unrun(session, batch, result, lease)
            if failed and _asks(batch.items):  # told "(failed: …)"
                with telemetry.continue_trace(trace):
                    await self._answer_askers(slot.agent_id, batch.items, result)
            return
        delivered = await self._settle_steers(session, lease) if session.steers else []
        read = [*batch.items, *self._steered(session, delivered)] if delivered else batch.items
        session.queue.complete([*item_ids, *delivered] if delivered else item_ids)
        settle(read, _sent_result(result))
        if _asks(read):  # a steered ask is answered too (it was left
            with telemetry.continue_trace(trace):  # unanswered until the broker's next start), in the ask's trace
                await self._answer_askers(slot.agent_id, read, result)

    @staticmethod
    def _with_owed_overflow(session: SessionSlot, batch: Batch, owed: list[tuple[QueueItem, int]]) -> Batch:
        """The batch with the ``[Queue overflow]`` summary of the drops the ledger says its session owes (whichever
        process dropped them, before a restart too; taken with the claim), carried by its first message until that
        one is finished (a retry of a cut or returned turn tells it again); as it was when none are owed."""
        summary = owed_summary([(item.content, cap) for item, cap in owed])
        if summary is None:
            return batch
        session.overflow_carrier = batch.items[0].item_id  # the ledger's carrier too: a retry takes it again
        return batch.with_overflow(summary)

    async def _run(
        self, slot: AgentSlot, session: SessionSlot, batch: Batch, item_ids: list[str], lease: Lease | None
    ) -> tuple[AgentResult, str | None]:
        """Start the batch's turn, hand it to its senders and its reply target, and wait for its result (one
        that cannot start fails; one whose final write failed too, with the reason).

        Also the trace the turn continues (its first message's, when tracing is on): the replies go on in it.
        Under a lease the run is aborted when the lease is lost, and :class:`LeaseLostError` is raised
        after it ended (whatever it wrote was refused). One coroutine from start to result: each wait of
        the run resumes through it, so no frame of a helper sits in between.
        """
        try:
            with claimed(slot.agent_id, session.label, batch.items, self._now_ms) as trace:  # the run's span:
                execution = await self._start(slot, session, batch, item_ids)  # a child of the first item's
        except NexusError as exc:  # a run that cannot start (no key, bad model): the items fail with the reason
            return _failed(str(exc)), None
        lost: list[str] = []
        renewal = None
        if lease is not None and self.leases is not None:

            def on_lost(why: str) -> None:
                lost.append(why)
                execution.abort(f"the session's lease was lost: {why}")

            renewal = self.leases.keep(session, lease, on_lost)
            execution.events_shown = renewal  # paused past the lease: its events wait for the verdict
        try:
            self._hand_over(session, batch, execution)
            try:
                result = await execution.result
            except (LeaseLostError, *_UNWRITTEN):
                raise
            except NexusError as exc:  # the run failed in another way: the items fail with the reason
                result = _failed(str(exc))
        finally:
            if renewal is not None:
                renewal.cancel()
        if lost and lease is not None and result.turn_id is None:  # a turn written before the loss stands:
            raise LeaseLostError(lease.session_label, lease.epoch, lost[0])  # its write passed the epoch check
        return result, trace

    def _hand_over(self, session: SessionSlot, batch: Batch, execution: Execution) -> None:
        """The started run is the session's, and its senders' and reply target's (before it does anything)."""
        session.run = execution
        session.delivering.clear()
        for item in batch.items:
            if item.ticket is not None:
                item.ticket.hand(execution)
        target = _newest_target(batch.items)
        if target is not None and self.deliver is not None:
            session.delivering.add(str(target))
            self.deliver(execution, target, batch.items[0].item_id)

    def _start(self, slot: AgentSlot, session: SessionSlot, batch: Batch, item_ids: list[str]) -> Awaitable[Execution]:
        """``Runtime.begin`` for one batch: its prompt, the items it consumes (``item_ids``, the batch's: the caller's
        list, not another built from the batch for every run), who sent them, the agent tools.

        ``begin``, not ``start``: the session lookup is awaited, so on PostgreSQL it waits off the event loop.
        Its coroutine itself is returned (the caller awaits it: no frame of this method in between)."""
        items = batch.items
        head = items[0]
        one = len(items) == 1
        one_sender = one or len({item.sender for item in items}) == 1
        plain = one and head.conversation_id is None and not head.hop and not head.deliver_to
        caller = session.plain_caller if plain else None
        if caller is None:
            conversation = (
                head.conversation_id if one else next((i.conversation_id for i in items if i.conversation_id), None)
            )
            caller = CallerContext(
                slot.agent_id,
                conversation,
                hop=head.hop if one else max(item.hop for item in items),
                max_hops=self.max_hops,
                session=session.key,
                deliver_to=_newest_target(items),
            )
            if plain:
                session.plain_caller = caller
        tools = session.plain_tools if plain else None
        if not tools or conversation_started(tools[0]):  # the caller tool holds a turn's conversation
            tools = self._tools(caller)
            if plain:
                session.plain_tools = tools
        spec = replace(slot.spec, max_tokens=head.max_tokens) if one and head.max_tokens else slot.spec
        return self._runtime.begin(
            spec,
            session.label,
            batch.prompt,
            consumes=item_ids,
            lease_fence=self.leases is not None,  # claimed without a lease: the turn write skips the fence
            source=message_source(head.sender, self._agents) if one_sender else "collect",
            tools=tools,
        )

    @staticmethod
    def _steered(session: SessionSlot, delivered: list[str]) -> list[QueuedMessage]:
        """The queued messages of the steers the turn read (still in the queue until it is completed)."""
        return [item for item in map(session.queue.find, delivered) if item is not None]

    async def _settle_unrun(self, session: SessionSlot, batch: Batch, result: AgentResult, lease: Lease | None) -> bool:
        """No turn was written: aborted before it started, or ended while the broker stops (its write found
        the database away) → back in the queue; could not start → failed (``True``: the batch's askers are
        owed a ``(failed: …)`` reply)."""
        await self._return_items(session, [steer.item_id for steer in session.steers], lease)
        session.steers.clear()
        if result.status == "aborted" or self._closing():
            await self._return_items(session, batch.item_ids, lease)
            return False
        reason = error_text(result) or "the run could not start"
        await self._queue.settle(batch.item_ids, "failed", reason=reason, lease=lease)
        session.queue.complete(batch.item_ids)
        settle(batch.items, SendAndWaitResult(False, error=reason))
        return True

    async def _settle_steers(self, session: SessionSlot, lease: Lease | None) -> list[str]:
        """After a run: delivered steers are consumed; returned ones go back in place, never dropped."""
        delivered: list[str] = []
        returned: list[str] = []
        for steer in session.steers:
            (delivered if steer.receipt.status == "delivered" else returned).append(steer.item_id)
        session.steers.clear()
        await self._return_items(session, returned, lease)
        return delivered

    def _skip_finished(
        self, slot: AgentSlot, session: SessionSlot, batch: Batch, error: QueueItemsFinishedError
    ) -> None:
        """A batch whose claim failed: drop its finished items from memory, put the others back.

        The in-memory queue can hold an item whose row is already finished (the store watcher
        adopted a committed row and it ran before its own ``send`` resumed, or another process
        finished it); its claim refuses, and it must neither run again nor stop the drain.
        """
        finished = [item for item in batch.items if item.item_id in error.finished]
        if isinstance(error, QueueItemsHeldError):  # two brokers on one SQLite file: the message says what to do
            log.warning("agent %s: skipped queue items finished or running elsewhere: %s", slot.agent_id, error)
        else:  # another process ran them first (several processes on one database): nothing is wrong
            done = ", ".join(f"{item} ({status})" for item, status in error.finished.items())
            log.info("agent %s: another process already ran these messages, not run here: %s", slot.agent_id, done)
        session.queue.complete([item.item_id for item in finished])
        settle(finished, SendAndWaitResult(False, error="the message was finished elsewhere"))
        session.queue.release([i for i in batch.item_ids if i not in error.finished])

    async def _return_items(self, session: SessionSlot, item_ids: list[str], lease: Lease | None) -> None:
        """Hand items back: waiting again in the store (fenced by the batch's ``lease``) and in their place in
        the session's queue."""
        if item_ids:
            try:
                await self._queue.release(item_ids, lease=lease)
            except QueueItemsFinishedError as exc:  # consumed meanwhile (a rescued turn put in the ledger as the run
                rest = [item for item in item_ids if item not in exc.finished]  # started): the next claim skips them
                await self._queue.release(rest, lease=lease)
            session.queue.release(item_ids)
            if session.overflow_carrier in item_ids:  # its summary goes with its next turn
                session.queue.overflow_owed = True


_UNWRITTEN = (TurnNotSavedError, LedgerFullError, LedgerBusyError)
"""A run that ended on these could not write the ledger (a full disk, a database held too long), not one that failed:
its messages are not failed but wait for the batch's next try. A turn whose final write failed is in a rescue file
(or lost) with the items it consumed: the next try's run puts it in the ledger first, consuming them in that
transaction, and finds its messages answered (``Runtime``'s run then returns that turn's result, nothing is run
again); a lost one is closed ``aborted`` and the messages run again. Failing them instead marked a message
``failed`` though its rescued turn answered it."""


def _asks(items: Sequence[QueuedMessage]) -> bool:
    """Whether an agent that asked without waiting sent one of these (its reply goes back to it)."""
    for item in items:  # noqa: SIM110 - a loop, not a generator: once for every run
        if item.reply_to is not None:
            return True
    return False


def _newest_target(items: Sequence[QueuedMessage]) -> dict[str, object] | None:
    """The reply target of the newest message of the batch that has one (an inbound chat's)."""
    for item in reversed(items):  # a loop, not a generator: twice for every run
        if item.deliver_to:
            return item.deliver_to
    return None


def _sent_result(result: AgentResult) -> SendAndWaitResult:
    """What a sender is told of the turn that consumed its message (seed 003's ``{success, error}`` + reply)."""
    success = result.status == "completed"  # positional (success, error, reply, turn): one for every run
    return SendAndWaitResult(success, None if success else error_text(result), result.reply or None, result.turn_id)


def _failed(reason: str) -> AgentResult:
    """The result of a run that could not start: no turn, the reason as its error."""
    from nexus.engine import AgentError, AgentResult

    return AgentResult(stop_reason="error", error=AgentError("unknown", reason))
