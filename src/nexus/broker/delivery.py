"""Deliver a run's reply to a chat adapter and record where it went (seed 004; DESIGN §4.5).

:class:`Deliverer` is the one place that sends an execution's ``StreamEvent``\\ s to an adapter
target through the :class:`~nexus.streaming.router.StreamRouter` (natively or in blocks) and
then writes a ``deliveries`` row: used by ``nexus send --deliver`` and by ``POST
/v1/agents/{id}/messages`` with ``deliver``. The row is written when the delivery has ended
*and* the run's turn is in the ledger — the turn never waits on an adapter, and is kept
whatever the adapter did; the row says what it did (``delivered | partial | failed``, the
platform's message ids, the error, the ``send`` attempts).

A message's reply target is also kept with the message (:func:`keep_reply_target`, the
``metadata.deliver_to`` an inbound chat message has too), so it survives its sender: a message
still queued when that process stops is run by the next broker, whose runner hook
(:func:`stored_target_delivery`, or the inbound router's) delivers the reply there. The stored
target names the process that delivers it live (``owner``), whose own hook leaves it alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

from nexus.llm.types import now_ms

if TYPE_CHECKING:
    from nexus.adapters.manager import AdapterManager
    from nexus.adapters.types import DeliveryTarget
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.broker.execution import BrokerExecution
    from nexus.broker.types import AgentMessage
    from nexus.config import AdapterConfig, NexusConfig
    from nexus.ledger import Ledger
    from nexus.ledger.deliveries import DeliveryLog, DeliveryRecord
    from nexus.streaming.events import StreamEvent
    from nexus.streaming.router import DeliveryReport, StreamRouter

log = logging.getLogger("nexus.broker")

CLOSE_GRACE_S = 10.0
"""How long ``close`` waits for deliveries in flight before cancelling those whose run never came."""

OWNER_KEY = "owner"
"""The key, in a stored ``deliver_to``, of the process that delivers it live (ignored by ``DeliveryTarget``)."""


def keep_reply_target(message: AgentMessage, target: DeliveryTarget, owner: str) -> None:
    """Store ``target`` with ``message`` (``metadata.deliver_to``), naming ``owner``, the process that
    delivers it live: ``nexus send --deliver`` and ``POST …/messages`` with ``deliver`` alike."""
    message.metadata["deliver_to"] = {**target.to_json(), OWNER_KEY: owner}


def stored_reply_target(run: EngineRunHandle) -> DeliveryTarget | None:
    """The reply target stored with a run's messages, or ``None``: none stored, or unreadable (logged:
    the run goes on, its reply is only not delivered)."""
    from nexus.adapters.types import DeliveryTarget, ProtocolError

    raw = run.request.deliver_to
    if raw is None:
        return None
    try:
        return DeliveryTarget.from_json(raw)
    except ProtocolError as exc:
        log.warning("run of %s: stored reply target unreadable (%s); not delivered", run.request.agent_id, exc)
        return None


def stored_target_delivery(deliverer: Deliverer, *, live_owner: str | None = None) -> Callable[[EngineRunHandle], None]:
    """A runner hook (``EngineRunner.on_run``): a run whose messages carry a stored reply target streams
    its reply there through ``deliverer`` (recorded with the turn), except a target ``live_owner``
    delivers live. For hosts without an inbound router: ``nexus queue drain``, ``nexus send``."""
    from nexus.broker.execution import run_execution

    def on_run(run: EngineRunHandle) -> None:
        raw = run.request.deliver_to
        if raw is not None and live_owner is not None and raw.get(OWNER_KEY) == live_owner:
            return
        target = stored_reply_target(run)
        if target is None:
            return
        deliverer.start(run_execution(run, target), target)  # subscribed now, from the hook: no event is missed

    return on_run


class Deliverer:
    """Delivers executions to adapter targets and records each delivery with its turn."""

    def __init__(self, router: StreamRouter, deliveries: DeliveryLog, adapters: Mapping[str, AdapterConfig]) -> None:
        self.router = router
        self.deliveries = deliveries
        self.adapters = adapters
        self._tasks: dict[asyncio.Task[DeliveryReport], BrokerExecution] = {}

    @classmethod
    def from_config(cls, config: NexusConfig, ledger: Ledger, manager: AdapterManager | None = None) -> Deliverer:
        """A deliverer for the adapters of ``nexus.toml`` (its own :class:`AdapterManager` unless given one)."""
        from nexus.adapters.manager import AdapterManager
        from nexus.ledger.deliveries import DeliveryLog
        from nexus.streaming.router import StreamRouter

        manager = manager or AdapterManager(config.adapters, home=config.home)
        return cls(StreamRouter(manager), DeliveryLog(ledger.database), config.adapters)

    def check(self, target: DeliveryTarget, *, prefix: str = "") -> DeliveryTarget:
        """``target`` if it can be delivered to; else :class:`~nexus.streaming.targets.DeliveryTargetError`."""
        from nexus.streaming.targets import check_target

        return check_target(target, self.adapters, prefix=prefix)

    def start(self, execution: BrokerExecution, target: DeliveryTarget) -> asyncio.Task[DeliveryReport]:
        """Deliver ``execution`` to ``target`` in the background (subscribed now: no event is missed).

        For a run announced by ``EngineRunner.on_run`` (an inbound chat message's reply), pass
        :func:`~nexus.broker.execution.run_execution` of it.
        """
        events = execution.stream.events()
        task = asyncio.get_running_loop().create_task(
            self._deliver(execution, target, events), name=f"delivery:{target.key}"
        )
        self._tasks[task] = execution
        task.add_done_callback(lambda done: self._tasks.pop(done, None))
        return task

    async def deliver(self, execution: BrokerExecution, target: DeliveryTarget) -> DeliveryReport:
        """Deliver ``execution`` to ``target`` and record it; returns the router's report."""
        return await self.start(execution, target)

    async def _deliver(
        self, execution: BrokerExecution, target: DeliveryTarget, events: AsyncIterator[StreamEvent]
    ) -> DeliveryReport:
        from nexus.streaming.router import DeliveryReport

        stream = execution.stream
        first = await anext(events, None)  # the run's turn has begun (or the message ended without one)
        started = now_ms()
        if not stream.started:  # nothing to send: no turn began
            outcome = await execution.result
            report = DeliveryReport(target, "none").failed(outcome.error or "the message was not run", partial=False)
            if outcome.turn_id is None and outcome.status == "aborted":
                return report  # the run gave the message back (it runs again later): nothing to record
        else:
            source = _chain(first, events)
            report = await self.router.deliver(target, source, run_id=stream.run_id, session_label=stream.session_label)
        outcome = await execution.result  # the turn is written: the row can point at it
        self._record(execution, report, outcome.turn_id, started)
        return report

    def _record(self, execution: BrokerExecution, report: DeliveryReport, turn_id: str | None, started: int) -> None:
        record = delivery_record(execution, report, turn_id, started)
        try:
            self.deliveries.record(record)
        except Exception as exc:  # the ledger is full or busy: the delivery happened; say so, never crash the run
            log.error("the delivery of turn %s to %s could not be recorded: %s", turn_id, report.target.key, exc)

    async def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Wait for deliveries in flight (close the broker first: its runs end), then stop the adapters.

        A delivery whose message has not run (it stays queued for the next start) is cancelled at
        once, one still going after ``grace_s`` too; neither is recorded (no turn carried it).
        """
        waiting = [task for task, execution in self._tasks.items() if not execution.stream.started]
        for task in waiting:
            task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, *waiting, return_exceptions=True)
        await self.router.close()


async def _chain(first: StreamEvent | None, rest: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    if first is not None:
        yield first
    async for event in rest:
        yield event


def delivery_record(
    execution: BrokerExecution, report: DeliveryReport, turn_id: str | None, started: int
) -> DeliveryRecord:
    """The ``deliveries`` row of one finished delivery."""
    from nexus.ledger.deliveries import DeliveryRecord

    target = report.target
    return DeliveryRecord(
        turn_id=turn_id,
        session_label=execution.session_label,
        adapter=target.channel,
        account_id=target.account_id,
        target=target.to_json(),
        path=report.path,
        status=report.status,
        started_at=started,
        completed_at=now_ms(),
        message_ids=list(report.message_ids),
        error=report.error,
        attempts=report.attempts,
        blocks_sent=report.blocks_sent,
        queue_item_id=execution.receipt.queue_item_id or None,
        run_id=execution.stream.run_id,
    )
