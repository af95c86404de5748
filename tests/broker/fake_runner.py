"""A runner whose turns the test drives: it records requests and steers and ends runs on demand.

It keeps the runner contract the real engine keeps: consumed items (the batch and delivered
steers) are marked delivered in one transaction with the "turn", and every steer receipt is
final before ``result()`` resolves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from nexus.broker.runner import RunOutcome, RunPhase, RunRequest, SteerStatus
from nexus.ledger.broker_store import BrokerStore


@dataclass(slots=True)
class FakeReceipt:
    text: str
    item_id: str | None
    one_at_a_time: bool
    status: SteerStatus = "pending"


@dataclass(slots=True)
class FakeRun:
    request: RunRequest
    store: BrokerStore
    phase: RunPhase = "streaming"
    steers: list[FakeReceipt] = field(default_factory=list)
    aborted: str | None = None
    _done: asyncio.Future[RunOutcome] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def steer(self, text: str, *, item_id: str | None, one_at_a_time: bool, source: str = "steer") -> FakeReceipt:
        receipt = FakeReceipt(text, item_id, one_at_a_time)
        if self._done.done():
            receipt.status = "returned"
        self.steers.append(receipt)
        return receipt

    def abort(self, reason: str) -> None:
        self.aborted = reason
        self.finish(status="aborted", deliver_steers=False)

    async def result(self) -> RunOutcome:
        return await asyncio.shield(self._done)

    def finish(self, *, status: str = "completed", reply: str = "ok", deliver_steers: bool = True) -> None:
        """End the run: steers become delivered (injected) or returned, items marked with the turn."""
        if self._done.done():
            return
        turn_id = f"turn-{id(self)}"
        delivered: list[str] = []
        for receipt in self.steers:
            if receipt.status == "pending":
                receipt.status = "delivered" if deliver_steers else "returned"
            if receipt.status == "delivered" and receipt.item_id is not None:
                delivered.append(receipt.item_id)
        self.store.deliver([*self.request.item_ids, *delivered], turn_id)
        self.phase = "done"
        self._done.set_result(RunOutcome(status=status, turn_id=turn_id, reply=reply))  # type: ignore[arg-type]


@dataclass(slots=True)
class FakeRunner:
    store: BrokerStore
    runs: list[FakeRun] = field(default_factory=list)
    auto_finish: bool = False
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, request: RunRequest) -> FakeRun:
        run = FakeRun(request, self.store)
        self.runs.append(run)
        self.started.set()
        if self.auto_finish:
            asyncio.get_running_loop().call_soon(run.finish)
        return run

    async def next_run(self, count: int) -> FakeRun:
        """Wait until at least ``count`` runs have started; the ``count``-th."""
        for _ in range(200):
            if len(self.runs) >= count:
                return self.runs[count - 1]
            await asyncio.sleep(0.005)
        raise AssertionError(f"run #{count} never started (runs: {[r.request.prompt for r in self.runs]})")
