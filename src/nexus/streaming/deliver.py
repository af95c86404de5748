"""Deliver a run's reply to a chat adapter and record where it went (seed 004; DESIGN §4.5).

:class:`Deliverer` is the one place that sends a run's ``StreamEvent``\\ s (:func:`stream_events`
of its :class:`~nexus.engine.Execution`) to an adapter target through the
:class:`~nexus.streaming.router.StreamRouter` (natively or in blocks) and then writes a
``deliveries`` row. The broker hands it every run whose messages carry a reply target
(``metadata.deliver_to``: an inbound chat message's, ``nexus send --deliver``'s, a ``deliver`` on
``POST /v1/agents/{id}/messages``), before the run does anything — in ``nexus serve``,
``nexus adapters monitor``, ``nexus queue drain`` and ``nexus send`` alike. The row is written when
the delivery has ended *and* the run's turn is in the ledger — the turn never waits on an adapter,
and is kept whatever the adapter did; the row says what it did (``delivered | partial | failed``,
the platform's message ids, the error, the ``send`` attempts).

The target is stored with the message, so it survives its sender: a message still queued when a
process stops is run by the next broker, which delivers its reply there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from nexus.llm import now_ms
from nexus.streaming.from_engine import stream_events

if TYPE_CHECKING:
    from nexus.adapters import AdapterManager, DeliveryTarget
    from nexus.config import AdapterConfig, NexusConfig
    from nexus.engine import AgentResult, Execution
    from nexus.ledger import DeliveryLog, DeliveryRecord, Ledger
    from nexus.streaming.events import StreamEvent
    from nexus.streaming.router import DeliveryReport, StreamRouter

log = logging.getLogger("nexus.streaming")

CLOSE_GRACE_S = 10.0
"""How long ``close`` waits for deliveries in flight before cancelling those whose run never began."""


class Deliverer:
    """Delivers runs to adapter targets and records each delivery with its turn."""

    def __init__(self, router: StreamRouter, deliveries: DeliveryLog, adapters: Mapping[str, AdapterConfig]) -> None:
        self.router = router
        self.deliveries = deliveries
        self.adapters = adapters
        self._tasks: dict[asyncio.Task[DeliveryReport], Execution] = {}

    @classmethod
    def from_config(cls, config: NexusConfig, ledger: Ledger, manager: AdapterManager | None = None) -> Deliverer:
        """A deliverer for the adapters of ``nexus.toml`` (its own :class:`AdapterManager` unless given one)."""
        from nexus.adapters import AdapterManager
        from nexus.ledger import DeliveryLog
        from nexus.streaming.router import StreamRouter

        manager = manager or AdapterManager(config.adapters, home=config.home)
        return cls(StreamRouter(manager), DeliveryLog(ledger.database), config.adapters)

    def check(self, target: DeliveryTarget, *, prefix: str = "") -> DeliveryTarget:
        """``target`` if it can be delivered to; else :class:`~nexus.streaming.targets.DeliveryTargetError`."""
        from nexus.streaming.targets import check_target

        return check_target(target, self.adapters, prefix=prefix)

    def start(
        self, execution: Execution, target: DeliveryTarget, *, queue_item_id: str | None = None
    ) -> asyncio.Task[DeliveryReport]:
        """Deliver ``execution`` to ``target`` in the background (subscribed now: no event is missed);
        ``queue_item_id`` is the message whose reply it is (kept in the row)."""
        events = stream_events(execution, target)
        task = asyncio.get_running_loop().create_task(
            self._deliver(execution, target, events, queue_item_id), name=f"delivery:{target.key}"
        )
        self._tasks[task] = execution
        return task

    def deliver_stored(self, execution: Execution, stored: dict[str, object], queue_item_id: str) -> None:
        """The broker's hook: deliver a run to the target stored with its messages (unreadable: logged, the
        run goes on, its reply is only not delivered)."""
        from nexus.adapters import DeliveryTarget, ProtocolError

        try:
            target = DeliveryTarget.from_json(stored)
        except ProtocolError as exc:
            log.warning("run %s: stored reply target unreadable (%s); not delivered", execution.run_id, exc)
            return
        self.start(execution, target, queue_item_id=queue_item_id)

    async def report(self, execution: Execution) -> DeliveryReport | None:
        """The report of ``execution``'s delivery once it has ended (``None``: it had none)."""
        task = next((task for task, delivered in list(self._tasks.items()) if delivered is execution), None)
        return None if task is None else await asyncio.shield(task)

    async def wait(self) -> None:
        """Wait until every delivery started so far has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _deliver(
        self,
        execution: Execution,
        target: DeliveryTarget,
        events: AsyncIterator[StreamEvent],
        queue_item_id: str | None,
    ) -> DeliveryReport:
        try:
            return await self._deliver_when_begun(execution, target, events, queue_item_id)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.pop(task, None)

    async def _deliver_when_begun(
        self,
        execution: Execution,
        target: DeliveryTarget,
        events: AsyncIterator[StreamEvent],
        queue_item_id: str | None,
    ) -> DeliveryReport:
        from nexus.streaming.router import DeliveryReport

        begun = await execution.wait_started()  # the run's turn has begun (or the run ended without one)
        started = now_ms()
        if not begun:  # nothing to send: no turn began
            result = await _result(execution)
            error = (result.error.message if result and result.error else None) or "the message was not run"
            report = DeliveryReport(target, "none").failed(error, partial=False)
            if result is None or (result.turn_id is None and result.status == "aborted"):
                return report  # the run gave the message back (it runs again later): nothing to record
        else:
            report = await self.router.deliver(
                target, events, run_id=execution.run_id, session_label=execution.session_label, framed=True
            )
        result = await _result(execution)  # the turn is written: the row can point at it
        self._record(execution, report, result.turn_id if result else None, started, queue_item_id)
        return report

    def _record(
        self, execution: Execution, report: DeliveryReport, turn_id: str | None, started: int, item_id: str | None
    ) -> None:
        record = delivery_record(execution, report, turn_id, started, item_id)
        try:
            self.deliveries.record(record)
        except Exception as exc:  # the ledger is full or busy: the delivery happened; say so, never crash the run
            log.error("the delivery of turn %s to %s could not be recorded: %s", turn_id, report.target.key, exc)

    async def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Wait for deliveries in flight (close the broker first: its runs end), then stop the adapters.

        A delivery whose run has not begun (its message stays queued for the next start) is cancelled
        at once, one still going after ``grace_s`` too; neither is recorded (no turn carried it).
        """
        waiting = [task for task, execution in self._tasks.items() if not execution.started]
        for task in waiting:
            task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, *waiting, return_exceptions=True)
        await self.router.close()


async def _result(execution: Execution) -> AgentResult | None:
    """The run's result (``None`` when it raised: the broker fails its items with the reason)."""
    try:
        return await asyncio.shield(execution.result)
    except Exception:
        return None


def delivery_record(
    execution: Execution, report: DeliveryReport, turn_id: str | None, started: int, queue_item_id: str | None
) -> DeliveryRecord:
    """The ``deliveries`` row of one finished delivery."""
    from nexus.ledger import DeliveryRecord

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
        queue_item_id=queue_item_id,
        run_id=execution.run_id,
    )
