"""A runtime whose runs the test drives: it records what each run was started with, its steers, and ends runs on demand.

It keeps the contract the engine's ``Runtime.start`` keeps for the broker: consumed items (the batch and
delivered steers) are marked delivered in one transaction with the "turn", and every steer receipt is
final before the run's ``result`` resolves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings
from nexus.broker.agent_tools import CallerContext
from nexus.engine import AgentError, AgentSpec
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore

WORKER = AgentIdentity("worker", "agent:worker", "worker")
MANAGER = AgentIdentity("manager", "agent:manager", "manager")


def message(n: int | str, content: str | None = None, *, to: str = "worker", sender: str = "user") -> AgentMessage:
    """Message ``m-<n>`` from ``sender`` to ``to`` (``task <n>`` unless ``content``)."""
    return AgentMessage(id=f"m-{n}", from_=sender, to=to, content=content or f"task {n}")


@contextmanager
def worker_and_manager(path: Path) -> Iterator[Ledger]:
    """A ledger at ``path`` with the sessions of :data:`WORKER` and :data:`MANAGER`."""
    with Ledger.open(path) as opened:
        for label in (WORKER.session_label, MANAGER.session_label):
            run_inline(opened.sessions.ensure(NewSession(label)))
        yield opened


@dataclass(slots=True)
class FakeReceipt:
    text: str
    item_id: str | None
    one_at_a_time: bool
    status: str = "pending"


@dataclass(slots=True)
class FakeResult:
    """What the broker reads of a run's ``AgentResult``."""

    status: str
    turn_id: str | None
    reply: str = ""
    error: AgentError | None = None


@dataclass(slots=True)
class Started:
    """What a run was started with (the caller context is the one its agent tools carry)."""

    spec: AgentSpec
    session_label: str
    prompt: str
    item_ids: tuple[str, ...]
    source: str | None
    caller: CallerContext | None

    @property
    def agent_id(self) -> str:
        return self.spec.id

    @property
    def session_key(self) -> str | None:
        return self.caller.session if self.caller is not None else None

    @property
    def conversation_id(self) -> str | None:
        return self.caller.conversation_id if self.caller is not None else None

    @property
    def deliver_to(self) -> dict[str, object] | None:
        return self.caller.deliver_to if self.caller is not None else None

    @property
    def hop(self) -> int:
        return self.caller.hop if self.caller is not None else 0


@dataclass(slots=True, eq=False)
class FakeRun:
    request: Started
    store: BrokerStore
    state: str = "streaming"
    steers: list[FakeReceipt] = field(default_factory=list)
    aborted: str | None = None
    result: asyncio.Future[FakeResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def run_id(self) -> str:
        return f"run-{id(self)}"

    @property
    def turn_id(self) -> str | None:
        return f"turn-{id(self)}" if self.result.done() else None

    @property
    def session_label(self) -> str:
        return self.request.session_label

    @property
    def started(self) -> bool:
        return True

    def steer(self, message: Any, *, id: str | None = None, mode: str = "all", source: str = "steer") -> FakeReceipt:
        receipt = FakeReceipt(str(getattr(message, "content", message)), id, mode == "one")
        if self.result.done():
            receipt.status = "returned"
        self.steers.append(receipt)
        return receipt

    def abort(self, reason: str = "aborted") -> None:
        self.aborted = reason
        self.finish(status="aborted", deliver_steers=False)

    def on_event(self, listener: Any) -> Any:
        return lambda: None

    def finish(self, *, status: str = "completed", reply: str = "ok", deliver_steers: bool = True) -> None:
        """End the run: steers become delivered (injected) or returned, items marked with the turn."""
        if self.result.done():
            return
        turn_id = f"turn-{id(self)}"
        delivered: list[str] = []
        for receipt in self.steers:
            if receipt.status == "pending":
                receipt.status = "delivered" if deliver_steers else "returned"
            if receipt.status == "delivered" and receipt.item_id is not None:
                delivered.append(receipt.item_id)
        self.store.deliver([*self.request.item_ids, *delivered], turn_id)
        self.state = "done"
        error = None if status == "completed" else AgentError("unknown", f"the run ended {status}")
        self.result.set_result(FakeResult(status, turn_id, reply, error))


@dataclass(slots=True)
class FakeRuntime:
    store: BrokerStore
    runs: list[FakeRun] = field(default_factory=list)
    auto_finish: bool = False
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def model_problem(self, ref: str) -> str | None:
        return None

    def start(
        self,
        spec: AgentSpec,
        session: str,
        message: Any,
        *,
        consumes: tuple[str, ...] = (),
        source: str | None = None,
        tools: Any = (),
        **_: Any,
    ) -> FakeRun:
        run = FakeRun(Started(spec, session, str(message), tuple(consumes), source, _caller(tools)), self.store)
        self.runs.append(run)
        self.started.set()
        if self.auto_finish:
            asyncio.get_running_loop().call_soon(run.finish)
        return run

    async def begin(self, spec: AgentSpec, session: str, message: Any, **options: Any) -> FakeRun:
        """``Runtime.begin``: the broker awaits the start of a batch's run."""
        return self.start(spec, session, message, **options)

    async def next_run(self, count: int) -> FakeRun:
        """Wait until at least ``count`` runs have started; the ``count``-th.

        Up to 10 s: on a loaded machine a PostgreSQL turn write and the next claim took longer than the 1 s this
        waited before (a CI run failed so), and a failed batch is tried again after a second."""
        for _ in range(2000):
            if len(self.runs) >= count:
                return self.runs[count - 1]
            await asyncio.sleep(0.005)
        raise AssertionError(f"run #{count} never started (runs: {[r.request.prompt for r in self.runs]})")


def _caller(tools: Any) -> CallerContext | None:
    """The caller context the agent tools of a run close over (what its messages to agents continue)."""
    for tool in tools:
        caller = getattr(getattr(tool.execute, "__self__", None), "caller", None)  # send_message_to_agent's
        if isinstance(caller, CallerContext):
            return caller
    return None


async def open_broker(ledger: Ledger, **settings: object) -> tuple[AgentBroker, FakeRuntime]:
    """A started broker on ``ledger`` whose runs the test drives (no agent registered yet)."""
    store = BrokerStore(ledger.database)
    runner = FakeRuntime(store)
    broker = AgentBroker(ledger, runner, BrokerSettings(**settings))  # type: ignore[arg-type]
    await broker.start()
    return broker, runner
