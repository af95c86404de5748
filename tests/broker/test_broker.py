"""AgentBroker over the durable store with a test-driven runner: modes, receipts, restart, bad input."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_runtime import MANAGER, WORKER, message, open_broker, worker_and_manager

from nexus.broker import (
    AgentIdentity,
    BrokerError,
    QueueOverrides,
    QueueSettings,
    UnknownAgentError,
)
from nexus.ledger import Ledger, NewSession
from nexus.ledger._queue_store import SqlQueueStore
from nexus.ledger._sqlite import Database
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with worker_and_manager(tmp_path / "agents.db") as opened:
        yield opened


async def test_followups_run_in_order_one_turn_each(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    for n in range(3):
        await broker.send(message(n))
    for n in range(1, 4):
        run = await runner.next_run(n)
        assert run.request.prompt == f"task {n - 1}"
        assert broker.get_state("worker") == "streaming"
        run.finish()
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    rows = BrokerStore(ledger.database).items(agent_id="worker")
    assert [(row.status, row.attempts) for row in rows] == [("delivered", 1)] * 3
    await broker.close()


async def test_steer_is_injected_into_the_running_turn(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="steer"))
    broker.register_agent(WORKER)
    await broker.send(message(1))
    run = await runner.next_run(1)
    receipt = await broker.send(message(2, "actually, use tabs"))
    assert receipt.steered and [s.text for s in run.steers] == ["actually, use tabs"]
    assert broker.get_queue_depth("worker") == 0
    run.finish()
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    assert len(runner.runs) == 1  # the steer was consumed by the same turn
    rows = BrokerStore(ledger.database).items(agent_id="worker")
    assert {row.turn_id for row in rows} == {f"turn-{id(run)}"} and {row.status for row in rows} == {"delivered"}
    await broker.close()


async def test_a_returned_steer_goes_back_to_the_front_of_the_queue(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="steer"))
    broker.register_agent(WORKER)
    await broker.send(message(1))
    run = await runner.next_run(1)
    await broker.send(message(2))  # steered
    run.state = "compacting"
    await broker.send(message(3))  # not steerable now: waits as a followup
    run.finish(deliver_steers=False)  # the run ended before the safe point: message 2 returned
    second = await runner.next_run(2)
    assert second.request.prompt == "task 2"  # first in line, before message 3
    second.finish()
    third = await runner.next_run(3)
    assert third.request.prompt == "task 3"
    third.finish()
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    await broker.close()


async def test_steer_backlog_steers_and_keeps_its_own_turn(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger)
    broker.register_agent(WORKER)
    await broker.send(message(1), "followup")
    run = await runner.next_run(1)
    await broker.send(message(2), "steer+backlog")
    assert [s.item_id for s in run.steers] == [None]
    run.finish()
    second = await runner.next_run(2)
    assert second.request.prompt == "task 2"
    second.finish()
    await broker.close()


async def test_queue_mode_hands_steers_one_at_a_time(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger)
    broker.register_agent(WORKER)
    await broker.send(message(1), "followup")
    run = await runner.next_run(1)
    await broker.send(message(2), "queue")
    await broker.send(message(3), "queue")
    assert [s.one_at_a_time for s in run.steers] == [True, True]
    run.finish()
    await broker.close()


async def test_interrupt_aborts_and_runs_the_backlog_with_the_new_message(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    await broker.send(message(1))
    run = await runner.next_run(1)
    await broker.send(message(2))
    await broker.interrupt("worker", message(3, "stop, do this instead"))
    assert run.aborted is not None and "m-3" in run.aborted
    second = await runner.next_run(2)
    assert "Queued #1\ntask 2" in second.request.prompt
    assert "Queued #2\nstop, do this instead" in second.request.prompt
    second.finish()
    rows = {row.message_id: row for row in BrokerStore(ledger.database).items(agent_id="worker")}
    assert rows["m-1"].status == "delivered"  # consumed by the aborted turn, which stays in history
    assert rows["m-2"].turn_id == rows["m-3"].turn_id == f"turn-{id(second)}"
    await broker.close()


async def test_collect_batches_after_the_quiet_window(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="collect", debounce_ms=50))
    broker.register_agent(WORKER)
    await broker.send(message(1))
    await broker.send(message(2, sender="manager"))
    run = await runner.next_run(1)
    assert run.request.prompt.startswith("[Queued messages while agent was busy]")
    assert "Queued #2 (from manager)\ntask 2" in run.request.prompt
    run.finish()
    await broker.close()


async def test_send_is_idempotent_on_the_message_id(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    first = await broker.send(message(1))
    again = await broker.send(message(1))
    assert again.duplicate and again.queue_item_id == first.queue_item_id
    (await runner.next_run(1)).finish()
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    after = await broker.send(message(1))  # delivered long ago: still recognised
    assert after.duplicate and len(runner.runs) == 1
    await broker.close()


async def test_send_and_wait_returns_the_reply(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger)
    runner.auto_finish = True
    broker.register_agent(WORKER)
    result = await broker.send_and_wait(message(1), timeout_ms=30_000)
    assert result.success and result.reply == "ok" and result.turn_id is not None
    await broker.close()


async def test_send_and_wait_times_out_but_keeps_the_message(ledger: Ledger) -> None:
    broker, _runner = await open_broker(ledger)
    broker.register_agent(WORKER)
    result = await broker.send_and_wait(message(1), timeout_ms=30)
    assert not result.success and "stays queued" in (result.error or "")
    assert BrokerStore(ledger.database).pending("worker")
    await broker.close()


async def test_bad_input_is_refused_and_nothing_is_stored(ledger: Ledger) -> None:
    broker, _ = await open_broker(ledger)
    broker.register_agent(WORKER)
    with pytest.raises(UnknownAgentError, match=r"unknown agent 'nobody'.*known: worker"):
        await broker.send(message(1, to="nobody"))
    with pytest.raises(BrokerError, match="no content"):
        await broker.send(message(2, "   "))
    with pytest.raises(BrokerError, match="to itself"):
        await broker.send(message(3, sender="worker"))
    with pytest.raises(BrokerError, match="limit is 1,000,000"):
        await broker.send(message(4, "x" * 1_000_001))
    with pytest.raises(BrokerError, match="unknown queue mode 'later'"):
        await broker.send(message(5), "later")
    with pytest.raises(BrokerError, match="reserved"):
        broker.register_agent(AgentIdentity("user", "agent:user"))
    assert BrokerStore(ledger.database).items() == []
    await broker.close()


async def test_cap_with_new_policy_refuses_and_records_the_drop(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="new"))
    await broker.send(message(1))
    await runner.next_run(1)  # message 1 is running; the queue is empty again
    await broker.send(message(2))
    with pytest.raises(BrokerError, match="queue is full"):
        await broker.send(message(3))
    rows = {row.to_json()["message_id"]: row.status for row in BrokerStore(ledger.database).items()}
    assert rows == {"m-1": "processing", "m-2": "queued", "m-3": "dropped"}
    await broker.close()


async def test_a_message_the_new_policy_refused_is_queued_when_sent_again_with_its_id(ledger: Ledger) -> None:
    """The sender was told "not queued": its retry with the same id (as idempotent sending asks) is queued and runs.
    A trial's retry was answered as a duplicate of the refusal (202 over HTTP) and never ran."""
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="new"))
    await broker.send(message(1))
    first = await runner.next_run(1)
    await broker.send(message(2))
    with pytest.raises(BrokerError, match="queue is full"):
        await broker.send(message(3))
    first.finish()
    (await runner.next_run(2)).finish()  # message 2: the queue has room again
    receipt = await broker.send(message(3))
    assert not receipt.duplicate
    assert (await runner.next_run(3)).request.prompt == "task 3"
    items = [row.to_json() for row in BrokerStore(ledger.database).items()]
    assert [(item["message_id"], item["status"]) for item in items if item["message_id"] == "m-3"] == [
        ("m-3", "dropped"),  # the refusal stays on record
        ("m-3", "processing"),
    ]
    assert (await broker.send(message(3))).duplicate, "accepted now: a third send is the duplicate"
    await broker.close()


async def test_the_receipt_names_the_messages_the_cap_pushed_out(ledger: Ledger) -> None:
    """``nexus serve`` drops at once what the cap pushes out: the sender is told which (a trial's 100
    concurrent sends all said "accepted" while 79 were dropped, and nobody heard)."""
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="old"))
    await broker.send(message(1))
    await runner.next_run(1)  # message 1 is running; the queue is empty again
    receipts = [await broker.send(message(n)) for n in (2, 3, 4)]
    assert [receipt.pushed_out for receipt in receipts] == [(), ("m-2",), ("m-3",)]
    rows = {row.message_id: row.status for row in BrokerStore(ledger.database).items()}
    assert rows == {"m-1": "processing", "m-2": "dropped", "m-3": "dropped", "m-4": "queued"}
    await broker.close()


async def test_restart_reloads_registry_and_pending_items(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    with Ledger.open(path) as ledger:
        await ledger.sessions.ensure(NewSession("agent:worker"))
        broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
        broker.register_agent(WORKER)
        for n in range(3):
            await broker.send(message(n))
        await runner.next_run(1)  # message 0 is being run when the process "dies"
        # no close(): the runs and drain tasks are simply dropped, like a crash
        for task in asyncio.all_tasks():
            if task.get_name().startswith("drain:"):
                task.cancel()
    with Ledger.open(path) as ledger:
        broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
        assert [a.identity.agent_id for a in broker.list_agents()] == ["worker"]
        prompts = []
        for n in range(1, 4):
            run = await runner.next_run(n)
            prompts.append(run.request.prompt)
            run.finish()
        assert prompts == ["task 0", "task 1", "task 2"]  # the cut message runs again, first
        rows = BrokerStore(ledger.database).items()
        assert [(row.message_id, row.attempts) for row in rows] == [("m-0", 2), ("m-1", 1), ("m-2", 1)]
        await broker.close()


async def test_an_item_cut_three_times_fails_with_its_reason(ledger: Ledger) -> None:
    store = BrokerStore(ledger.database)
    store.save_agent("worker", role="worker", session_label="agent:worker", spec={})
    item, _ = store.accept(
        agent_id="worker", session_label="agent:worker", message_id="m-1", sender="user",
        message=message(1).to_json(), mode="followup",
    )  # fmt: skip
    for _ in range(3):
        store.claim([item.id])
    broker, runner = await open_broker(ledger)
    await asyncio.sleep(0.05)
    assert runner.runs == []
    (row,) = store.items()
    assert row.status == "failed" and "cut 3 times" in (row.error or "")
    await broker.close()


async def test_clear_queue_drops_waiting_messages_only(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    await broker.send(message(1))
    await runner.next_run(1)
    await broker.send(message(2))
    await broker.send(message(3))
    assert await broker.clear_queue("worker") == 2 and broker.get_queue_depth("worker") == 0
    statuses = {row.message_id: row.status for row in BrokerStore(ledger.database).items()}
    assert statuses == {"m-1": "processing", "m-2": "dropped", "m-3": "dropped"}
    await broker.close()


async def test_a_look_for_other_processes_rows_while_a_clear_is_written_loads_none_back(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store watcher may look while ``clear_queue``'s drop is being written: the cleared rows still read
    ``queued`` and this broker no longer holds them, as another process's new messages would look. Loaded back,
    a cleared message stayed in the queue (to be run, or refused at its claim)."""
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"), wakeups="poll", poll_ms=3_600_000)
    broker.register_agent(WORKER)
    await broker.send(message(1))
    run = await runner.next_run(1)
    await broker.send(message(2))
    settle = SqlQueueStore.settle
    looked: list[bool] = []

    async def looked_first(self: SqlQueueStore, item_ids: list[str], outcome: str, **kwargs: Any) -> Any:
        if outcome == "dropped":
            await broker._watcher.adopt()
            looked.append(True)
        return await settle(self, item_ids, outcome, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SqlQueueStore, "settle", looked_first)
    assert await broker.clear_queue("worker") == 1
    assert looked == [True]
    assert broker.get_queue_depth("worker") == 0, "the cleared message is not queued again"
    run.finish()
    assert await broker.wait_for_idle("worker", timeout_ms=2000)
    assert len(runner.runs) == 1
    await broker.close()


async def test_concurrency_cap_limits_active_runs(ledger: Ledger) -> None:
    for n in range(4):
        await ledger.sessions.ensure(NewSession(f"agent:w{n}"))
    broker, runner = await open_broker(ledger, max_concurrent=2, queue=QueueSettings(mode="followup"))
    for n in range(4):
        broker.register_agent(AgentIdentity(f"w{n}", f"agent:w{n}"))
        await broker.send(message(n, to=f"w{n}"))
    await runner.next_run(2)
    await asyncio.sleep(0.05)
    assert len(runner.runs) == 2
    runner.runs[0].finish()
    await runner.next_run(3)
    await broker.close()


async def test_messages_between_agents_are_logged(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger)
    broker.register_agent(WORKER)
    broker.register_agent(MANAGER)
    await broker.send(message(1, "review auth.py", sender="manager"))
    run = await runner.next_run(1)
    assert run.request.prompt == "[Message from manager]\nreview auth.py"
    rows = ledger.database.connection.execute("SELECT from_agent, to_agent, content FROM broker_messages")
    assert rows.fetchall() == [("manager", "worker", "review auth.py")]
    await broker.close()


async def test_the_run_continues_the_messages_conversation(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger)
    broker.register_agent(WORKER)
    broker.register_agent(MANAGER)
    sent = message(1, sender="manager")
    sent.conversation_id, sent.metadata = "conv-9", {"hop": 3}
    await broker.send(sent)
    run = await runner.next_run(1)
    assert (run.request.conversation_id, run.request.hop, run.request.source) == ("conv-9", 3, "agent:manager")
    run.finish()
    await broker.close()


async def test_concurrent_sends_share_transactions_and_keep_their_order(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup", cap=100))
    runner.auto_finish = True
    broker.register_agent(WORKER)
    rows_per_transaction: list[int] = []
    begin = Database.write

    def counting(self: Database, fn: object, **kwargs: object) -> object:
        before = self.connection.total_changes
        try:
            return begin(self, fn, **kwargs)  # type: ignore[arg-type]
        finally:
            rows_per_transaction.append(self.connection.total_changes - before)

    monkeypatch.setattr(Database, "write", counting)
    receipts = await asyncio.gather(*(broker.send(message(n)) for n in range(50)), broker.send(message(7)))
    assert rows_per_transaction[0] == 50  # one transaction for the whole burst (the duplicate wrote nothing)
    assert [r.duplicate for r in receipts] == [False] * 50 + [True]
    assert receipts[-1].queue_item_id == receipts[7].queue_item_id
    assert await broker.wait_for_idle("worker", timeout_ms=5000)
    assert [run.request.prompt for run in runner.runs] == [f"task {n}" for n in range(50)]
    await broker.close()


async def test_an_unreadable_stored_message_fails_alone_on_restart(ledger: Ledger) -> None:
    store = BrokerStore(ledger.database)
    store.save_agent("worker", role="worker", session_label="agent:worker", spec={})
    for n, body in enumerate(({"content": ""}, {"content": "fine", "timestamp": "noon"}, message(3).to_json())):
        store.accept(
            agent_id="worker", session_label="agent:worker", message_id=f"m-{n}", sender="user",
            message=body, mode="followup",
        )  # fmt: skip
    broker, runner = await open_broker(ledger)
    run = await runner.next_run(1)
    assert run.request.prompt == "task 3"
    statuses = {row.message_id: (row.status, row.error or "") for row in store.items()}
    assert statuses["m-0"][0] == statuses["m-1"][0] == "failed"
    assert "cannot be read" in statuses["m-0"][1] and "was not run" in statuses["m-1"][1]
    run.finish()
    await broker.close()


async def test_messages_other_processes_queue_are_picked_up_while_running(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    runner.auto_finish = True
    broker.register_agent(WORKER)
    other_process = BrokerStore(ledger.database)  # stands for `nexus send` in another process
    other_process.accept(
        agent_id="worker", session_label="agent:worker", message_id="m-ext", sender="user",
        message=message("ext", "from elsewhere").to_json(), mode="followup",
    )  # fmt: skip
    run = await runner.next_run(1)
    assert run.request.prompt == "from elsewhere"
    assert await broker.wait_for_idle("worker", timeout_ms=5000)
    assert [row.status for row in other_process.items()] == ["delivered"]
    await broker.close()


async def test_an_own_message_is_not_adopted_twice(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    import nexus.broker._watcher as watcher_module

    monkeypatch.setattr(watcher_module, "WATCH_INTERVAL_S", 0.0)  # the watcher looks at every loop turn
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    runner.auto_finish = True
    broker.register_agent(WORKER)
    receipts = [await broker.send(message(n)) for n in range(20)]
    assert not any(r.duplicate for r in receipts)
    assert await broker.wait_for_idle("worker", timeout_ms=5000)
    assert [run.request.prompt for run in runner.runs] == [f"task {n}" for n in range(20)]
    await broker.close()


async def test_an_item_finished_elsewhere_is_skipped_and_the_drain_goes_on(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """The in-memory queue holds an item whose row is already finished (e.g. adopted by the store
    watcher and run before its own ``send`` resumed): its claim fails, the drain drops it from the
    queue and goes on, it never runs again. The drain task used to die on the claim's error.

    Nothing is wrong then (on PostgreSQL another process ran it first): no warning, whose internal
    words a ``nexus send`` printed; an info line says it plainly."""
    import logging

    from nexus.ledger.broker_store import move_items

    caplog.set_level(logging.INFO, logger="nexus.broker")

    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    await broker.send(message(0))
    first = await runner.next_run(1)
    waiting = await broker.send(message(1))
    ledger.database.write(lambda c: move_items(c, [waiting.queue_item_id], "dropped", error="finished elsewhere"))
    first.finish()
    await broker.send(message(2))
    second = await runner.next_run(2)
    assert second.request.prompt == "task 2"  # task 1 was finished elsewhere: not run again
    second.finish()
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    assert broker.get_queue_depth("worker") == 0
    item = BrokerStore(ledger.database).get_item(waiting.queue_item_id)
    assert item is not None and item.status == "dropped"
    await broker.close()
    said = [r for r in caplog.records if r.name == "nexus.broker" and waiting.queue_item_id in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO], [r.getMessage() for r in said]
    assert "another process already ran" in said[0].getMessage()
