"""A run beside the queues (``AgentBroker.run_beside``: a chat completion in another session) keeps its agent busy.

``get_state(agent)`` and ``abort`` saw such a run, but ``wait_for_idle``, ``wait_until_idle`` and
``get_state(agent, session=KEY)`` looked only at the sessions' queues and runs: while the completion streamed,
the agent's session read ``idle`` and a wait for the agent to be idle returned at once. They count it now,
from the moment it is asked for (while it waits for a run slot, nothing of it is runnable yet but it will run)
until its run has ended. The runtime is the test's fake (its runs end when the test says).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_runtime import FakeRun, FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        for agent in ("a", "b"):
            run_inline(opened.sessions.ensure(NewSession(f"agent:{agent}")))
        yield opened  # type: ignore[misc]


async def _broker(ledger: Ledger, runner: FakeRuntime, cap: int) -> AgentBroker:
    settings = BrokerSettings(max_concurrent=cap, queue=QueueSettings(mode="followup"))
    broker = AgentBroker(ledger, runner, settings)
    await broker.start()
    for agent in ("a", "b"):
        broker.register_agent(AgentIdentity(agent, f"agent:{agent}"))
    return broker


def _beside(broker: AgentBroker, runner: FakeRuntime, label: str) -> asyncio.Future[object]:
    return broker.run_beside("b", lambda tools: runner.begin(None, label, "beside"))  # type: ignore[arg-type,return-value]


async def test_a_run_beside_the_queues_keeps_its_agent_and_its_session_busy(ledger: Ledger) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, cap=2)
    run = await _beside(broker, runner, "agent:b:user:bob")
    assert isinstance(run, FakeRun)
    assert broker.get_state("b") == "streaming"
    assert broker.get_state("b", session="agent:b:user:bob") == "streaming"  # its session, by its label
    assert broker.get_state("b", session="other") == "idle"
    assert await broker.wait_for_idle("b", timeout_ms=100) is False
    assert await broker.wait_for_idle("b", timeout_ms=100, session="agent:b:user:bob") is False
    assert await broker.wait_for_idle("b", timeout_ms=100, session="other") is True
    assert await broker.wait_for_idle("a", timeout_ms=100) is True
    everyone = asyncio.ensure_future(broker.wait_until_idle())
    await asyncio.sleep(0.05)
    assert not everyone.done()  # b still runs a completion
    run.finish()
    await asyncio.wait_for(everyone, 5)
    assert await broker.wait_for_idle("b", timeout_ms=30_000) is True
    assert broker.get_state("b") == "idle" and broker.get_state("b", session="agent:b:user:bob") == "idle"
    await broker.close()


async def test_a_run_beside_the_queues_waiting_for_a_slot_keeps_its_agent_busy(ledger: Ledger) -> None:
    """Cap 1, held by a's batch: b's completion waits for the slot. Nothing of it ran, but b is not idle:
    a wait for b returns only once that completion has run."""
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, cap=1)
    await broker.send(AgentMessage(id="a-0", from_="user", to="a", content="a0"))
    batch = await runner.next_run(1)
    started = _beside(broker, runner, "agent:b:user:bob")
    await asyncio.sleep(0.02)
    assert not started.done() and broker.get_state("b") == "idle"  # waiting, not running
    waiting = asyncio.ensure_future(broker.wait_for_idle("b", timeout_ms=5000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    batch.finish()
    run = await asyncio.wait_for(started, 5)
    assert isinstance(run, FakeRun) and not waiting.done()
    run.finish()
    assert await asyncio.wait_for(waiting, 5) is True
    await broker.close()


async def test_a_waiting_run_beside_the_queues_whose_session_is_known_keeps_only_that_session_busy(
    ledger: Ledger,
) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, cap=1)
    await broker.send(AgentMessage(id="a-0", from_="user", to="a", content="a0"))
    batch = await runner.next_run(1)
    label = "agent:b:user:bob"
    started = broker.run_beside("b", lambda tools: runner.begin(None, label, "beside"), session=label)  # type: ignore[arg-type,return-value]
    assert await broker.wait_for_idle("b", timeout_ms=50, session=label) is False  # it waits for a slot there
    assert await broker.wait_for_idle("b", timeout_ms=1000, session="other") is True
    assert await broker.wait_for_idle("b", timeout_ms=50) is False
    batch.finish()
    run = await asyncio.wait_for(started, 5)
    assert isinstance(run, FakeRun)
    run.finish()
    assert await broker.wait_for_idle("b", timeout_ms=5000, session=label) is True
    await broker.close()
