"""A message's run, live and awaited (seed 004's stream and result) through its ``SendReceipt`` on the real engine."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from nexus.adapters.types import DeliveryTarget
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, SendReceipt
from nexus.config import load_config
from nexus.engine import AgentSpec, Execution, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.session_lock import session_lock_path
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.streaming import stream_events
from nexus.streaming.events import StreamEnd, StreamError, StreamEvent, StreamStart, Token, ToolStatus
from nexus.testing import ScriptedModel
from nexus.testing.steps import reply, stall, text, tool_call

TARGET = DeliveryTarget("broker", "local", "agent:coder")


@asynccontextmanager
async def broker_on(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[tuple[AgentBroker, Ledger]]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        broker = AgentBroker(ledger, env, BrokerSettings(queue=QueueSettings(mode="followup")))
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:coder"))
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec=AgentSpec(model=scripted.model.ref))
        try:
            yield broker, ledger
        finally:
            await broker.close()


async def followed(receipt: SendReceipt) -> tuple[Execution, list[StreamEvent]]:
    """The run that takes the message and all of its StreamEvents (subscribed as it was handed over)."""
    run = await receipt.follow()
    assert run is not None
    execution, subscription = run
    return execution, [event async for event in stream_events(execution, TARGET, subscription)]


async def test_the_stream_yields_the_seed_events_and_the_result_the_written_turn(tmp_path: Path) -> None:
    scripted = ScriptedModel(
        [reply(text("Reading."), tool_call("read", {"path": "notes.txt"}, id="c1")), text("It says hi.")],
        chunk_chars=3,
    )
    (tmp_path / "nexus-home" / "workspace").mkdir(parents=True, exist_ok=True)
    (tmp_path / "nexus-home" / "workspace" / "notes.txt").write_text("hi\n")
    async with broker_on(tmp_path, scripted) as (broker, ledger):
        receipt = await broker.send(AgentMessage("m-1", "user", "coder", "what does it say?"))
        execution, events = await followed(receipt)
        result = await execution.result
        turn = await ledger.turns.get(result.turn_id or "")
        outcome = await receipt.outcome()
    kinds = [e.type for e in events]
    assert kinds[0] == "stream_start" and isinstance(events[0], StreamStart)
    assert events[0].session_label == "agent:coder" and events[0].run_id == execution.run_id
    ends = [e for e in events if isinstance(e, StreamEnd)]
    assert [e.final for e in ends] == [False, True] and events[-1] is ends[-1]
    tools = [e for e in events if isinstance(e, ToolStatus)]
    assert [(t.status, t.summary) for t in tools] == [("started", "Reading notes.txt"), ("completed", "Read notes.txt")]
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Reading.It says hi."
    assert result.status == "completed" and result.reply == "It says hi." and turn.status == "completed"
    assert outcome.success and outcome.turn_id == result.turn_id and outcome.reply == "It says hi."
    assert receipt.message_id == "m-1" and not receipt.duplicate
    assert not execution.is_streaming and not execution.is_compacting


async def test_a_queued_message_streams_when_its_run_starts_and_nothing_is_missed(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("first")), text("second reply")])
    async with broker_on(tmp_path, scripted) as (broker, _):
        first = await broker.send(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.send(AgentMessage("m-2", "user", "coder", "two"))
        later = second.follow()  # asked now; the run that takes it starts after the first
        running = await first.execution()
        assert running is not None
        await _until(lambda: running.is_streaming)
        assert not later.done()  # the agent is busy with the first
        running.abort("enough")
        aborted = await running.result
        assert aborted.status == "aborted" and aborted.turn_id
        run = await later
        assert run is not None
        events = [event async for event in stream_events(run[0], TARGET, run[1])]
        outcome = await second.outcome()
    assert outcome.success and outcome.reply == "second reply"
    assert events[0].type == "stream_start" and events[-1] == StreamEnd(run[0].run_id, final=True)
    assert "".join(e.text for e in events if isinstance(e, Token)) == "second reply"


async def test_abort_before_the_run_starts_writes_the_turn_aborted_and_does_not_run_it_again(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("first")), text("never"), text("later")])
    async with broker_on(tmp_path, scripted) as (broker, ledger):
        first = await broker.send(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.send(AgentMessage("m-2", "user", "coder", "two"))
        later = second.follow()
        running = await first.execution()
        assert running is not None
        await _until(lambda: running.is_streaming)
        second.abort("changed my mind")  # still queued behind the first
        running.abort("stop")
        run = await later
        assert run is not None
        events = [event async for event in stream_events(run[0], TARGET, run[1])]
        result = await run[0].result
        outcome = await second.outcome()
        item = BrokerStore(ledger.database).get_item(second.queue_item_id)
        third = await broker.send_and_wait(AgentMessage("m-3", "user", "coder", "three"), timeout_ms=20_000)
    assert result.status == "aborted" and result.turn_id is not None and not outcome.success
    assert item is not None and (item.status, item.turn_id) == ("delivered", result.turn_id)
    assert isinstance(events[-1], StreamError) and not events[-1].partial
    assert third.success and third.reply == "never"  # the aborted message did not run again


async def test_a_message_dropped_from_its_queue_has_no_run_and_fails_its_outcome(tmp_path: Path) -> None:
    async with broker_on(tmp_path, ScriptedModel([stall(after_chunks=2, seconds=30)])) as (broker, _):
        first = await broker.send(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.send(AgentMessage("m-2", "user", "coder", "two"))
        running = await first.execution()
        assert running is not None
        await _until(lambda: running.is_streaming)
        assert await broker.clear_queue("coder") == 1
        outcome = await asyncio.wait_for(second.outcome(), 5)
        run = await asyncio.wait_for(second.execution(), 5)
        running.abort()
    assert not outcome.success and "cleared" in (outcome.error or "") and outcome.turn_id is None
    assert run is None


async def test_a_duplicate_of_a_finished_message_resolves_at_once(tmp_path: Path) -> None:
    async with broker_on(tmp_path, ScriptedModel([text("done")])) as (broker, _):
        first = await broker.send(AgentMessage("m-1", "user", "coder", "go"))
        done = await first.outcome()
        again = await broker.send(AgentMessage("m-1", "user", "coder", "go"))
        outcome = await asyncio.wait_for(again.outcome(), 5)
        run = await asyncio.wait_for(again.execution(), 5)
    assert again.duplicate and outcome.turn_id == done.turn_id and outcome.success
    assert run is None


async def _until(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def test_a_steered_message_follows_the_running_turn_it_went_into(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    wait = f"while [ ! -e {gate} ]; do sleep 0.02; done; echo ok"
    scripted = ScriptedModel(
        [reply(text("Working."), tool_call("bash", {"command": wait}, id="c1")), text("Saw your note.")]
    )
    async with broker_on(tmp_path, scripted) as (broker, ledger):
        first = await broker.send(AgentMessage("m-1", "user", "coder", "start"))
        run = await first.follow()
        assert run is not None
        events = stream_events(run[0], TARGET, run[1])
        async for event in events:  # the tool waits for the gate: a safe point comes after it
            if isinstance(event, ToolStatus):
                break
        steer = await broker.send(AgentMessage("m-2", "user", "coder", "also check the logs"), "steer")
        assert steer.steered
        steered = await steer.follow()  # the running turn: its events from now on
        assert steered is not None and steered[0] is run[0]
        gate.touch()
        seen = [event async for event in stream_events(steered[0], TARGET, steered[1])]
        done, outcome = await run[0].result, await asyncio.wait_for(steer.outcome(), 20)
        item = BrokerStore(ledger.database).get_item(steer.queue_item_id)
    assert done.status == "completed" and outcome.turn_id == done.turn_id and outcome.reply == "Saw your note."
    assert item is not None and (item.status, item.turn_id) == ("delivered", done.turn_id)
    assert "".join(e.text for e in seen if isinstance(e, Token)) == "Saw your note."
    assert seen[-1] == StreamEnd(run[0].run_id, final=True)


async def test_a_run_that_gives_the_message_back_before_its_turn_is_not_the_last_the_next_one_is(
    tmp_path: Path,
) -> None:
    async with broker_on(tmp_path, ScriptedModel([text("the real reply")])) as (broker, ledger):
        lock = session_lock_path(Path(ledger.path), "agent:coder")
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)  # "another process" runs the session: the run waits to start
        try:
            receipt = await broker.send(AgentMessage("m-1", "user", "coder", "hi"))
            first = await receipt.execution()
            assert first is not None
            assert broker.abort("coder")  # aborted before its turn began: the message goes back to the queue
            assert (await first.result).turn_id is None
            await _until(lambda: receipt.ticket is not None and receipt.ticket.current is not first)
        finally:
            os.close(fd)
        second = await receipt.execution()
        assert second is not None
        outcome = await asyncio.wait_for(receipt.outcome(), 20)
        result = await second.result
    assert outcome.success and outcome.reply == "the real reply" and outcome.turn_id == result.turn_id
    assert second is not first and result.status == "completed"
