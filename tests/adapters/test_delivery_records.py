"""Where a reply went is recorded with its turn: message with a reply target → the broker's run → ``Deliverer``
→ real adapter process → ``deliveries``.

Real adapter processes throughout: the shipped ``jsonl`` adapter streaming natively, a ``stream``
adapter killed with SIGKILL in the middle of a delivery, and a send-only adapter that answers
``rate_limited`` with ``retry_after_ms`` once. The turn is in the ledger whatever the adapter did.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from adapter_helpers import MakeManager, adapter, script_command

from nexus.adapters.manager import AdapterManager
from nexus.adapters.types import DeliveryTarget
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, SendReceipt
from nexus.config import AdapterConfig, load_config
from nexus.engine import AgentSpec, Execution, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.deliveries import DeliveryLog
from nexus.streaming import Deliverer
from nexus.streaming.router import DeliveryReport, StreamRouter
from nexus.testing import InstantClock, ScriptedModel
from nexus.testing.steps import reply, stall, text, tool_call


@dataclass(slots=True)
class Rig:
    ledger: Ledger
    broker: AgentBroker
    deliverer: Deliverer
    manager: AdapterManager

    async def send(self, message: AgentMessage, target: DeliveryTarget | None = None) -> SendReceipt:
        """Send ``message`` with ``target`` as its reply target (as inbound chat and ``--deliver`` do)."""
        if target is not None:
            message.deliver_reply(target)
        return await self.broker.send(message)

    async def run(self, receipt: SendReceipt) -> tuple[Execution, DeliveryReport | None]:
        """The run that took the message, and the report of its delivery once that ended."""
        execution = await receipt.execution()
        assert execution is not None
        return execution, await self.deliverer.report(execution)


@asynccontextmanager
async def rig(
    tmp_path: Path, scripted: ScriptedModel, adapters: dict[str, AdapterConfig], make_manager: MakeManager, **kw: object
) -> AsyncIterator[Rig]:
    """A broker draining agent ``coder`` on ``scripted``, and a deliverer for ``adapters``."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        finish_timeout_s = float(kw.pop("finish_timeout_s", 30.0))  # type: ignore[arg-type]
        manager = make_manager(adapters, **kw)
        router = StreamRouter(manager, finish_timeout_s=finish_timeout_s)
        deliverer = Deliverer(router, DeliveryLog(ledger.database), adapters)
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        settings = BrokerSettings(queue=QueueSettings(mode="followup"))
        broker = AgentBroker(ledger, env, settings, deliver=deliverer.deliver_stored)
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:coder"))
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec=AgentSpec(model=scripted.model.ref))
        try:
            yield Rig(ledger, broker, deliverer, manager)
        finally:
            await broker.close()
            await deliverer.close()


def _turn_of(rig: Rig, item_id: str) -> str:
    item = BrokerStore(rig.ledger.database).get_item(item_id)
    assert item is not None and item.status == "delivered" and item.turn_id
    return item.turn_id


async def test_a_native_delivery_records_the_adapters_message_ids_with_the_turn(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    out = tmp_path / "out.jsonl"
    adapters = {"files": adapter(builtin="jsonl", accounts={"a": {"config": {"path": str(out)}}})}
    scripted = ScriptedModel([text("Hello over the wire.")], chunk_chars=4)
    async with rig(tmp_path, scripted, adapters, make_manager) as r:
        target = DeliveryTarget("files", "a", "chat:1")
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "hi"), target)
        execution, report = await r.run(receipt)
        outcome = await execution
        assert report is not None and report.ok and report.path == "native" and report.message_ids
        turn_id = _turn_of(r, receipt.queue_item_id)
        assert outcome.turn_id == turn_id and outcome.reply == "Hello over the wire."
        (record,) = DeliveryLog(r.ledger.database).for_turn(turn_id)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["text"] for line in written] == ["Hello over the wire."]
    assert record.status == "delivered" and record.path == "native" and record.attempts == 1
    assert record.message_ids == report.message_ids == [written[0]["message_id"]]
    assert (record.adapter, record.account_id, record.target["to"]) == ("files", "a", "chat:1")
    assert record.queue_item_id == receipt.queue_item_id and record.session_label == "agent:coder"
    assert record.run_id == execution.run_id
    assert record.completed_at >= record.started_at and record.error is None


async def test_an_adapter_killed_mid_delivery_records_partial_and_the_turn_is_intact(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    lines = tmp_path / "lines.jsonl"
    gate = tmp_path / "go"
    # the run says something, then a tool waits for the test's go-ahead: the adapter dies in between
    wait = f"while [ ! -e {gate} ]; do sleep 0.02; done; echo ok"
    scripted = ScriptedModel(
        [reply(text("Looking into it. "), tool_call("bash", {"command": wait}, id="c1")), text("All done.")],
        chunk_chars=4,
        tokens_per_second=50,  # the text comes over time, as from a provider: several token lines
    )
    adapters = {
        "rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": {"record": str(lines)}}})
    }
    async with rig(tmp_path, scripted, adapters, make_manager) as r:
        await r.manager.stream_process("rec", "x")  # up before the run, as a long-running adapter is
        target = DeliveryTarget("rec", "x", "u")
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "look"), target)
        execution = await receipt.execution()
        assert execution is not None
        delivery = asyncio.ensure_future(r.deliverer.report(execution))
        # the first words reached the adapter and it has said which message shows them (however the
        # text was split into token lines: on a busy machine it can come as one)
        process = await r.manager.stream_process("rec", "x")
        await _until(lambda: '"type":"token"' in _read(lines))
        await _until(lambda: process.current is not None and process.current.message_ids == ["m2"])
        assert process.supervisor.proc is not None
        os.kill(process.supervisor.proc.pid, signal.SIGKILL)
        gate.touch()  # the run goes on without its adapter
        outcome = await asyncio.wait_for(execution.result, 30)
        report = await asyncio.wait_for(delivery, 30)  # ends as stream_error{partial}
        assert report is not None and not report.ok and report.partial
        # whichever the bridge noticed first: the pipe closing under its next write, or the process's exit
        assert any(why in (report.error or "") for why in ("exited with code -9", "closed its stdin")), report.error
        assert outcome.status == "completed" and outcome.reply == "All done."
        turn_id = _turn_of(r, receipt.queue_item_id)
        (record,) = DeliveryLog(r.ledger.database).for_turn(turn_id)
        texts = [m.message for m in await r.ledger.turns.messages(turn_id)]
    assert record.status == "partial" and record.path == "native"
    assert record.error is not None and "in the middle of a delivery" in record.error
    assert record.message_ids == ["m2"], "the message the adapter created before it died"
    assert "Looking into it." in json.dumps([str(t) for t in texts]) and "All done." in json.dumps(
        [str(t) for t in texts]
    )


async def test_block_delivery_records_the_send_attempts_after_a_retry_after(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    counter = tmp_path / "count"
    config = {"fault": "rate_limited", "failures": 1, "counter": str(counter)}
    adapters = {
        "f": adapter(
            command=script_command("faulty.py"), blocks={"human_delay_ms": [0, 0]}, accounts={"a": {"config": config}}
        )
    }
    clock = InstantClock()
    scripted = ScriptedModel([text("One short block.")], chunk_chars=100)
    async with rig(tmp_path, scripted, adapters, make_manager, clock=clock) as r:
        target = DeliveryTarget("f", "a", "x")
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "hi"), target)
        _, report = await r.run(receipt)
        turn_id = _turn_of(r, receipt.queue_item_id)
        (record,) = DeliveryLog(r.ledger.database).for_turn(turn_id)
    assert report is not None and report.ok and report.path == "blocks"
    assert (record.status, record.path, record.blocks_sent, record.attempts) == ("delivered", "blocks", 1, 2)
    assert record.message_ids == ["ok1"] and 1.5 in clock.sleeps  # the adapter's retry_after_ms was honoured
    assert counter.read_text() == "2"


async def test_an_undeliverable_target_is_recorded_failed_and_the_turn_is_kept(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    adapters = {"gone": adapter(command=str(tmp_path / "no-such-adapter"), accounts={"a": {}})}
    scripted = ScriptedModel([text("Nobody will see this.")])
    async with rig(tmp_path, scripted, adapters, make_manager) as r:
        target = DeliveryTarget("gone", "a", "u")
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "hi"), target)
        _, report = await r.run(receipt)
        turn_id = _turn_of(r, receipt.queue_item_id)
        (record,) = DeliveryLog(r.ledger.database).for_turn(turn_id)
        assert (await r.ledger.turns.get(turn_id)).status == "completed"
    assert (
        report is not None
        and not report.ok
        and record.status == "failed"
        and record.path == "none"
        and record.message_ids == []
    )
    assert record.error is not None and "not found" in record.error


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _until(check: object, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


async def test_a_message_dropped_before_it_ran_sends_nothing_and_its_item_says_why(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    out = tmp_path / "out.jsonl"
    adapters = {"files": adapter(builtin="jsonl", accounts={"a": {"config": {"path": str(out)}}})}
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30)])
    async with rig(tmp_path, scripted, adapters, make_manager) as r:
        busy = await r.send(AgentMessage("m-1", "user", "coder", "one"))
        target = DeliveryTarget("files", "a", "chat:1")
        queued = await r.send(AgentMessage("m-2", "user", "coder", "two"), target)
        running = await busy.execution()
        assert running is not None
        await _until(lambda: running.is_streaming)
        await r.broker.clear_queue("coder")
        outcome = await asyncio.wait_for(queued.outcome(), 30)
        running.abort()
        item = BrokerStore(r.ledger.database).get_item(queued.queue_item_id)
        records = DeliveryLog(r.ledger.database).recent()
    assert not outcome.success and not out.exists() and records == []  # no run took it: nothing to deliver
    assert item is not None and item.status == "dropped" and "cleared" in (item.error or "")


async def test_the_turn_never_waits_for_an_adapter_that_does_not_answer(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    lines = tmp_path / "lines.jsonl"
    config = {"record": str(lines), "silent": True}  # reads everything, never says delivery_complete
    adapters = {"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})}
    scripted = ScriptedModel([text("Into the void.")])
    async with rig(tmp_path, scripted, adapters, make_manager, finish_timeout_s=2.0) as r:
        target = DeliveryTarget("rec", "x", "u")
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "hi"), target)
        execution = await receipt.execution()
        assert execution is not None
        delivery = asyncio.ensure_future(r.deliverer.report(execution))
        outcome = await asyncio.wait_for(execution.result, 30)
        assert outcome.status == "completed" and (await r.ledger.turns.get(outcome.turn_id or "")).status == "completed"
        assert not delivery.done(), "the turn is written while the adapter still owes its answer"
        report = await asyncio.wait_for(delivery, 30)
        (record,) = DeliveryLog(r.ledger.database).for_turn(outcome.turn_id or "")
    assert report is not None and not report.ok and "no delivery_complete within 2 s" in (report.error or "")
    # the adapter never said it showed anything: nothing is known to have reached the user
    assert record.status == "failed" and record.turn_id == outcome.turn_id


async def test_closing_does_not_wait_for_a_message_that_stays_queued(tmp_path: Path, make_manager: MakeManager) -> None:
    out = tmp_path / "out.jsonl"
    adapters = {"files": adapter(builtin="jsonl", accounts={"a": {"config": {"path": str(out)}}})}
    async with rig(tmp_path, ScriptedModel([stall(after_chunks=2, seconds=30)]), adapters, make_manager) as r:
        busy = await r.send(AgentMessage("m-1", "user", "coder", "one"))
        target = DeliveryTarget("files", "a", "chat:1")
        queued = await r.send(AgentMessage("m-2", "user", "coder", "two"), target)
        running = await busy.execution()
        assert running is not None
        await _until(lambda: running.is_streaming)
        await r.broker.close()  # as nexus serve stops: the run is aborted, m-2 stays queued
        await asyncio.wait_for(r.deliverer.close(grace_s=600), 20)  # not the grace period: m-2 has no run
        item = BrokerStore(r.ledger.database).get_item(queued.queue_item_id)
        records = DeliveryLog(r.ledger.database).recent()
    assert item is not None and item.status == "queued"
    assert records == [] and not out.exists()


async def test_a_message_with_a_stored_target_is_delivered_and_recorded(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    # how the broker delivers what nobody follows live (the replies to inbound chat messages, a queued --deliver)
    out = tmp_path / "out.jsonl"
    adapters = {"files": adapter(builtin="jsonl", accounts={"a": {"config": {"path": str(out)}}})}
    async with rig(tmp_path, ScriptedModel([text("From the hook.")]), adapters, make_manager) as r:
        receipt = await r.send(AgentMessage("m-1", "user", "coder", "hi"), DeliveryTarget("files", "a", "chat:9"))
        assert (await receipt.outcome()).success
        await asyncio.wait_for(r.deliverer.close(), 30)  # the delivery ends and is recorded
        turn_id = _turn_of(r, receipt.queue_item_id)
        (record,) = DeliveryLog(r.ledger.database).for_turn(turn_id)
    (written,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert written["text"] == "From the hook." and record.message_ids == [written["message_id"]]
    assert record.queue_item_id == receipt.queue_item_id and record.status == "delivered"
