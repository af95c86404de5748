"""The broker and messages that reach it from outside a running send: before start, from another process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_runtime import FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore


async def test_a_message_sent_before_start_is_queued_once(tmp_path: Path) -> None:
    """``send`` before ``start`` queues the item in memory and stores its row; the reload at start
    read the row back and queued it a second time: a collect batch carried the message twice."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        await ledger.sessions.ensure(NewSession("agent:a"))
        runner = FakeRuntime(BrokerStore(ledger.database), auto_finish=True)
        settings = BrokerSettings(queue=QueueSettings(mode="collect", debounce_ms=10))
        broker = AgentBroker(ledger, runner, settings)
        broker.register_agent(AgentIdentity("a", "agent:a"))
        await broker.send(AgentMessage(id="m1", from_="user", to="a", content="hello"))
        assert broker.get_queue_depth("a") == 1
        await broker.start()
        assert broker.get_queue_depth("a") == 1
        assert await broker.wait_for_idle("a", timeout_ms=30_000)
        assert [run.request.prompt for run in runner.runs] == ["hello"]
        await broker.close()


async def _started_with_agent_a(ledger: Ledger) -> tuple[AgentBroker, FakeRuntime]:
    """A started broker with one agent ``a`` (followup) on a test-driven runner."""
    await ledger.sessions.ensure(NewSession("agent:a"))
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = AgentBroker(ledger, runner, BrokerSettings(queue=QueueSettings(mode="followup")))
    broker.register_agent(AgentIdentity("a", "agent:a"))
    await broker.start()
    return broker, runner


async def test_an_interrupt_another_process_queues_cuts_the_running_turn(tmp_path: Path) -> None:
    """``nexus send --mode interrupt`` while a server drains only writes the row; the server adopts it.
    It used to wait behind the running turn like a followup; now it aborts it, as a local send does."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started_with_agent_a(ledger)
        await broker.send(AgentMessage(id="m1", from_="user", to="a", content="long task"))
        run = await runner.next_run(1)
        with Ledger.open(tmp_path / "agents.db") as other:  # the other process's own connection
            message = AgentMessage(id="m2", from_="user", to="a", content="stop")
            BrokerStore(other.database).accept(
                agent_id="a", session_label="agent:a", message_id="m2", sender="user",
                message=message.to_json(), mode="interrupt",
            )  # fmt: skip
        second = await runner.next_run(2)  # adopted by the watcher (it polls every 0.25 s)
        assert run.aborted == "interrupted by message m2"
        assert second.request.prompt == "stop"
        second.finish()
        assert await broker.wait_for_idle("a", timeout_ms=30_000)
        await broker.close()


async def test_an_own_steer_the_watcher_adopts_first_is_steered_once(tmp_path: Path) -> None:
    """A row may be loaded before its own ``send`` resumes (a takeover's reload of the session under leases
    does not know the sends in flight; the store watcher did it too before it left such rows to their send);
    the loader steers the run with it, and the ``send`` must not steer it again (the model would read the
    message twice). The watcher, told of no send in flight, stands for that loader here."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started_with_agent_a(ledger)
        broker._watcher.arriving = None
        broker._watcher.interval_s = 0.0  # it looks at every loop turn (the patched constant was not read)
        await broker.send(AgentMessage(id="m0", from_="user", to="a", content="long task"))
        run = await runner.next_run(1)
        receipts = [
            await broker.send(AgentMessage(id=f"s{n}", from_="user", to="a", content=f"steer {n}"), "steer")
            for n in range(20)
        ]
        assert all(receipt.steered for receipt in receipts)
        assert sorted(steer.text for steer in run.steers) == sorted(f"steer {n}" for n in range(20))
        run.finish()
        assert await broker.wait_for_idle("a", timeout_ms=30_000)
        assert len(runner.runs) == 1
        await broker.close()


async def _committed_not_held(broker: AgentBroker, message: AgentMessage) -> asyncio.Task[object]:
    """A ``send`` stopped where its accept has committed and it has not resumed to hold the row.

    The send submits its accept in the loop iteration it starts in, the queue store commits the group in
    the next (``call_soon``) and the send resumes in the one after: two ``sleep(0)`` land in between."""
    task: asyncio.Task[object] = asyncio.ensure_future(broker.send(message))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return task


async def test_the_watcher_leaves_a_row_its_own_send_is_queueing(tmp_path: Path) -> None:
    """A look of the store watcher between an accept's commit and its send's resumption loaded the row a second
    time (a broker behind on its sends did it for ~13 % of messages at 13,000/s, each look a burst of loads)."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started_with_agent_a(ledger)
        task = await _committed_not_held(broker, AgentMessage(id="m1", from_="user", to="a", content="hello"))
        assert BrokerStore(ledger.database).items(agent_id="a")[0].status == "queued"  # committed
        await broker._watcher.adopt()
        assert broker.get_queue_depth("a") == 0  # left to the send, which holds it next
        await task
        run = await runner.next_run(1)
        assert run.request.prompt == "hello"
        run.finish()
        assert await broker.wait_for_idle("a", timeout_ms=30_000)
        assert len(runner.runs) == 1
        await broker.close()


async def test_a_row_whose_send_was_cancelled_before_holding_it_is_adopted_later(tmp_path: Path) -> None:
    """The row the watcher left to its send is looked at again: a send cancelled after its commit (a client
    gone) never holds it, and the next look adopts it, so the accepted message still runs."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started_with_agent_a(ledger)
        task = await _committed_not_held(broker, AgentMessage(id="m1", from_="user", to="a", content="hello"))
        await broker._watcher.adopt()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert broker.get_queue_depth("a") == 0
        await broker._watcher.adopt()
        run = await runner.next_run(1)
        assert run.request.prompt == "hello"
        run.finish()
        assert await broker.wait_for_idle("a", timeout_ms=30_000)
        await broker.close()
