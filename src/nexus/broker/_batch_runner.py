"""One batch of a session, from its claim to its settlement: run it, then account for every item.

The scheduler hands a session's next batch to :meth:`BatchRunner.run` on a worker. The batch's
items are claimed (an item finished elsewhere is skipped, never run again), handed to the
:class:`AgentRunner` as one :class:`RunRequest`, and settled by how the run ended: consumed by
the turn, back in the queue in their place (a run aborted before it wrote a turn, a steer the run
handed back), or failed with the reason (a run that could not start). Whoever accepted a message
owns it until it is delivered or handed back; this is where the broker keeps that promise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Container, Sequence

from nexus import telemetry
from nexus.broker._group_commit import GroupCommitter
from nexus.broker._items import error_text, message_source
from nexus.broker._queue_trace import claimed
from nexus.broker._slot import AgentSlot, SessionSlot
from nexus.broker.runner import AgentRunner, RunOutcome, RunRequest
from nexus.broker.session_queue import Batch, QueuedMessage
from nexus.broker.types import SendAndWaitResult
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.errors import QueueItemsFinishedError

log = logging.getLogger("nexus.broker")

AnswerAskers = Callable[[str, Sequence[QueuedMessage], RunOutcome], Awaitable[None]]
"""Send a turn's reply back to the agents that asked without waiting (:meth:`ReplySender.answer_askers`):
for every message the turn consumed, its batch and the steers it read."""


class BatchRunner:
    """Runs one claimed batch of a session and settles its items (see the module docstring)."""

    def __init__(
        self,
        store: BrokerStore,
        writes: GroupCommitter,
        runner: AgentRunner,
        agents: Container[str],
        answer_askers: AnswerAskers,
        closing: Callable[[], bool],
        now_ms: Callable[[], int],
    ) -> None:
        """``agents`` is the broker's registry (a sender that is an agent is stored as ``agent:<id>``);
        ``closing()`` says the broker is shutting down (a batch claimed meanwhile does not start)."""
        self._store = store
        self._writes = writes
        self._runner = runner
        self._agents = agents
        self._answer_askers = answer_askers
        self._closing = closing
        self._now_ms = now_ms

    async def run(self, slot: AgentSlot, session: SessionSlot, batch: Batch) -> None:
        """Claim, run and settle ``batch`` of ``session`` (the session's run is set while it runs)."""
        item_ids = batch.item_ids
        session.interrupted = False
        try:
            await self._writes.claim(item_ids)
        except QueueItemsFinishedError as exc:  # an item finished elsewhere: never run it again, keep draining
            self._skip_finished(slot, session, item_ids, exc)
            return
        if self._closing() or session.interrupted:  # close() or an interrupt came as the claim committed: they
            self._return_items(session, item_ids)  # found no run to abort, so none starts (close waited for a
            return  # whole turn; the interrupt ran after it). The interrupt's batch takes these as its backlog
        try:
            with claimed(slot.agent_id, session.label, batch.items, self._now_ms()) as trace:
                session.run = self._runner.start(self._request(slot, session, batch, item_ids))
            outcome = await session.run.result()
        except Exception as exc:  # a runner that failed to start: the items go back, the error is kept
            session.run = None
            self._return_items(session, item_ids)
            slot.resolve(item_ids, SendAndWaitResult(False, error=f"the run could not start: {exc}"))
            await asyncio.sleep(0.1)
            return
        session.run = None
        slot.last_activity_ms = self._now_ms()
        if outcome.turn_id is None and outcome.status != "completed":
            failed = self._settle_unrun(slot, session, batch, outcome)
            if failed and any(item.reply_to is not None for item in batch.items):  # told "(failed: …)"
                with telemetry.continue_trace(trace):
                    await self._answer_askers(slot.agent_id, batch.items, outcome)
            return
        delivered = self._settle_steers(session) if session.steers else []
        consumed = [*item_ids, *delivered] if delivered else item_ids
        read = [*batch.items, *self._steered(session, delivered)] if delivered else batch.items
        session.queue.complete(consumed)
        if slot.waiters:  # only send_and_wait callers wait on a result
            result = SendAndWaitResult(
                success=outcome.status == "completed", error=error_text(outcome), reply=outcome.reply or None,
                turn_id=outcome.turn_id,
            )  # fmt: skip
            slot.resolve(consumed, result)
        if any(item.reply_to is not None for item in read):  # a steered ask is answered too (it was left
            with telemetry.continue_trace(trace):  # unanswered until the broker's next start), in the ask's trace
                await self._answer_askers(slot.agent_id, read, outcome)

    @staticmethod
    def _steered(session: SessionSlot, delivered: list[str]) -> list[QueuedMessage]:
        """The queued messages of the steers the turn read (still in the queue until it is completed)."""
        return [item for item in map(session.queue.find, delivered) if item is not None]

    def _request(self, slot: AgentSlot, session: SessionSlot, batch: Batch, item_ids: list[str]) -> RunRequest:
        """What the runner needs for one batch (a lone item, the usual batch, without the scans)."""
        items = batch.items
        head = items[0]
        one_sender = len(items) == 1 or len({item.sender for item in items}) == 1
        return RunRequest(
            agent_id=slot.agent_id,
            session_label=session.label,
            prompt=batch.prompt,
            item_ids=tuple(item_ids),
            sender=head.sender if one_sender else None,
            source=message_source(head.sender, self._agents) if one_sender else "collect",
            spec={**slot.spec, "max_tokens": head.max_tokens} if len(items) == 1 and head.max_tokens else slot.spec,
            role=slot.identity.role,
            conversation_id=(head.conversation_id or None)
            if len(items) == 1
            else next((item.conversation_id for item in items if item.conversation_id), None),
            hop=head.hop if len(items) == 1 else max(item.hop for item in items),
            session_key=session.key,
            deliver_to=(head.deliver_to or None)
            if len(items) == 1
            else next((item.deliver_to for item in reversed(items) if item.deliver_to), None),
        )

    def _settle_unrun(self, slot: AgentSlot, session: SessionSlot, batch: Batch, outcome: RunOutcome) -> bool:
        """No turn was written: aborted before it started → back in the queue; could not start → failed
        (``True``: the batch's askers are owed a ``(failed: …)`` reply)."""
        self._return_items(session, [steer.item_id for steer in session.steers])
        session.steers.clear()
        if outcome.status == "aborted":
            self._return_items(session, batch.item_ids)
            return False
        reason = outcome.error or "the run could not start"
        self._store.fail(batch.item_ids, reason)
        session.queue.complete(batch.item_ids)
        slot.resolve(batch.item_ids, SendAndWaitResult(False, error=reason))
        return True

    def _settle_steers(self, session: SessionSlot) -> list[str]:
        """After a run: delivered steers are consumed; returned ones go back in place, never dropped."""
        delivered: list[str] = []
        returned: list[str] = []
        for steer in session.steers:
            (delivered if steer.receipt.status == "delivered" else returned).append(steer.item_id)
        session.steers.clear()
        self._return_items(session, returned)
        return delivered

    def _skip_finished(
        self, slot: AgentSlot, session: SessionSlot, item_ids: list[str], error: QueueItemsFinishedError
    ) -> None:
        """A batch whose claim failed: drop its finished items from memory, put the others back.

        The in-memory queue can hold an item whose row is already finished (the store watcher
        adopted a committed row and it ran before its own ``send`` resumed, or another process
        finished it); its claim refuses, and it must neither run again nor stop the drain.
        """
        finished = [i for i in item_ids if i in error.finished]
        log.warning("agent %s: skipped queue items finished or running elsewhere: %s", slot.agent_id, error)
        session.queue.complete(finished)
        slot.resolve(finished, SendAndWaitResult(False, error="the message was finished elsewhere"))
        session.queue.release([i for i in item_ids if i not in finished])

    def _return_items(self, session: SessionSlot, item_ids: list[str]) -> None:
        """Hand items back: waiting again in the store and in their place in the session's queue."""
        if item_ids:
            self._store.release(item_ids)
            session.queue.release(item_ids)
