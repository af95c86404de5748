"""``AgentBroker.execute`` → ``BrokerExecution{stream, result}`` (seed 004) on the real engine runner."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from fake_runner import FakeRunner

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerError, BrokerSettings, QueueSettings
from nexus.broker.engine_runner import EngineRunHandle, EngineRunner
from nexus.config import load_config
from nexus.engine import Runtime
from nexus.engine.execution.failover import ProfileCooldowns
from nexus.engine.execution.session_lock import session_lock_path
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.streaming.events import StreamEnd, StreamError, StreamEvent, StreamStart, Token, ToolStatus
from nexus.testing import ScriptedModel
from nexus.testing.steps import reply, stall, text, tool_call


@asynccontextmanager
async def broker_on(
    tmp_path: Path, scripted: ScriptedModel, runs: list[EngineRunHandle] | None = None
) -> AsyncIterator[tuple[AgentBroker, Ledger]]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        runner = EngineRunner(env)
        if runs is not None:
            runner.on_run(runs.append)
        broker = AgentBroker(BrokerStore(ledger.database), runner, BrokerSettings(queue=QueueSettings(mode="followup")))
        runner.attach(broker)
        await broker.start()
        ledger.ensure_session("agent:coder")
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec={"model": scripted.model.ref})
        try:
            yield broker, ledger
        finally:
            await broker.close()


async def test_the_stream_yields_the_seed_events_and_the_result_the_written_turn(tmp_path: Path) -> None:
    scripted = ScriptedModel(
        [reply(text("Reading."), tool_call("read", {"path": "notes.txt"}, id="c1")), text("It says hi.")],
        chunk_chars=3,
    )
    (tmp_path / "nexus-home" / "workspace").mkdir(parents=True, exist_ok=True)
    (tmp_path / "nexus-home" / "workspace" / "notes.txt").write_text("hi\n")
    async with broker_on(tmp_path, scripted) as (broker, ledger):
        execution = await broker.execute(AgentMessage("m-1", "user", "coder", "what does it say?"))
        streaming_seen: list[bool] = []
        execution.stream.on_event(
            lambda e: streaming_seen.append(execution.stream.is_streaming) if type(e) is Token else None
        )
        events: list[StreamEvent] = [event async for event in execution.stream]
        outcome = await execution.result
        turn = ledger.get_turn(outcome.turn_id or "")
    kinds = [e.type for e in events]
    assert kinds[0] == "stream_start" and isinstance(events[0], StreamStart)
    assert events[0].session_label == "agent:coder" and events[0].run_id == execution.stream.run_id
    ends = [e for e in events if isinstance(e, StreamEnd)]
    assert [e.final for e in ends] == [False, True] and events[-1] is ends[-1]
    tools = [e for e in events if isinstance(e, ToolStatus)]
    assert [(t.status, t.summary) for t in tools] == [("started", "Reading notes.txt"), ("completed", "Read notes.txt")]
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Reading.It says hi."
    assert outcome.status == "completed" and outcome.reply == "It says hi." and turn.status == "completed"
    assert execution.receipt.message_id == "m-1" and not execution.receipt.duplicate
    assert streaming_seen and all(streaming_seen)
    assert not execution.stream.is_streaming and not execution.stream.is_compacting


async def test_a_queued_message_streams_when_its_run_starts_and_early_events_are_replayed(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("first")), text("second reply")])
    async with broker_on(tmp_path, scripted) as (broker, _):
        first = await broker.execute(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.execute(AgentMessage("m-2", "user", "coder", "two"))
        await _until(lambda: first.stream.is_streaming)
        assert not second.stream.started  # the agent is busy with the first
        first.stream.abort("enough")
        aborted = await first.result
        assert aborted.status == "aborted" and aborted.turn_id
        outcome = await second.result  # nobody subscribed while it ran: the first subscriber gets it all
        events = [event async for event in second.stream]
    assert outcome.status == "completed" and outcome.reply == "second reply"
    assert events[0].type == "stream_start" and events[-1] == StreamEnd(second.stream.run_id, final=True)
    assert "".join(e.text for e in events if isinstance(e, Token)) == "second reply"


async def test_abort_before_the_run_starts_writes_the_turn_aborted_and_does_not_run_it_again(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("first")), text("never"), text("later")])
    async with broker_on(tmp_path, scripted) as (broker, ledger):
        first = await broker.execute(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.execute(AgentMessage("m-2", "user", "coder", "two"))
        await _until(lambda: first.stream.is_streaming)
        second.stream.abort("changed my mind")  # still queued behind the first
        first.stream.abort("stop")
        outcome = await second.result
        events = [event async for event in second.stream]
        item = BrokerStore(ledger.database).get_item(second.receipt.queue_item_id)
        third = await broker.send_and_wait(AgentMessage("m-3", "user", "coder", "three"), timeout_ms=20_000)
    assert outcome.status == "aborted" and outcome.turn_id is not None
    assert item is not None and (item.status, item.turn_id) == ("delivered", outcome.turn_id)
    assert isinstance(events[-1], StreamError) and not events[-1].partial
    assert third.success and third.reply == "never"  # the aborted message did not run again


async def test_a_message_dropped_from_its_queue_ends_its_stream_and_fails_its_result(tmp_path: Path) -> None:
    async with broker_on(tmp_path, ScriptedModel([stall(after_chunks=2, seconds=30)])) as (broker, _):
        first = await broker.execute(AgentMessage("m-1", "user", "coder", "one"))
        second = await broker.execute(AgentMessage("m-2", "user", "coder", "two"))
        await _until(lambda: first.stream.is_streaming)
        assert broker.clear_queue("coder") == 1
        outcome = await asyncio.wait_for(second.result, 5)
        events = [event async for event in second.stream]
        first.stream.abort()
    assert outcome.status == "failed" and "cleared" in (outcome.error or "") and outcome.turn_id is None
    assert len(events) == 1 and isinstance(events[0], StreamError) and not events[0].partial


async def test_a_duplicate_of_a_finished_message_resolves_at_once(tmp_path: Path) -> None:
    async with broker_on(tmp_path, ScriptedModel([text("done")])) as (broker, _):
        first = await broker.execute(AgentMessage("m-1", "user", "coder", "go"))
        done = await first
        again = await broker.execute(AgentMessage("m-1", "user", "coder", "go"))
        outcome = await asyncio.wait_for(again.result, 5)
        events = [event async for event in again.stream]
    assert again.receipt.duplicate and outcome.turn_id == done.turn_id and outcome.status == "completed"
    assert [e.type for e in events] == ["stream_end"]


async def test_execute_needs_a_runner_that_announces_its_runs(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        broker = AgentBroker(store, FakeRunner(store))
        await broker.start()
        broker.register_agent(AgentIdentity("coder", "agent:coder"))
        with pytest.raises(BrokerError, match="announce its runs"):
            await broker.execute(AgentMessage("m-1", "user", "coder", "go"))
        assert BrokerStore(ledger.database).items() == []  # refused before anything was queued
        await broker.close()


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
        first = await broker.execute(AgentMessage("m-1", "user", "coder", "start"))
        tools: list[StreamEvent] = []
        first.stream.on_event(lambda e: tools.append(e) if isinstance(e, ToolStatus) else None)
        await _until(lambda: bool(tools))  # the tool waits for the gate: a safe point comes after it
        steer = await broker.execute(AgentMessage("m-2", "user", "coder", "also check the logs"), "steer")
        assert steer.receipt.steered
        events: list[StreamEvent] = []
        steer.stream.on_event(events.append)
        gate.touch()
        done, steered = await first.result, await asyncio.wait_for(steer.result, 20)
        item = BrokerStore(ledger.database).get_item(steer.receipt.queue_item_id)
    assert done.status == "completed" and steered.turn_id == done.turn_id and steered.reply == "Saw your note."
    assert item is not None and (item.status, item.turn_id) == ("delivered", done.turn_id)
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Saw your note."
    assert events[-1] == StreamEnd(steer.stream.run_id, final=True)


async def test_a_run_that_gives_the_message_back_before_its_turn_is_not_followed_the_next_one_is(
    tmp_path: Path,
) -> None:
    runs: list[EngineRunHandle] = []
    async with broker_on(tmp_path, ScriptedModel([text("the real reply")]), runs) as (broker, ledger):
        lock = session_lock_path(Path(ledger.path), "agent:coder")
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)  # "another process" runs the session: the run waits to start
        try:
            execution = await broker.execute(AgentMessage("m-1", "user", "coder", "hi"))
            await _until(lambda: len(runs) == 1)
            assert broker.abort("coder")  # aborted before its turn began: the message goes back to the queue
            await _until(lambda: len(runs) == 2)  # and a new run takes it
            assert (await runs[0].result()).turn_id is None
        finally:
            os.close(fd)
        outcome = await asyncio.wait_for(execution.result, 20)
        events = [event async for event in execution.stream]
    assert outcome.status == "completed" and outcome.reply == "the real reply" and outcome.turn_id
    assert events[0].type == "stream_start" and events[-1] == StreamEnd(execution.stream.run_id, final=True)
