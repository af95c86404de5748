"""The broker answers agents that asked without waiting: after the turn, after a crash, and when the run failed.

A worker's reply to an ``ask`` (``waitForReply`` false) is a message back to the asking agent, sent once the
turn that consumed the ask ends; a crash between the two leaves it unsent, so the next start sends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_runtime import MANAGER, WORKER, FakeRuntime, message, open_broker, worker_and_manager

from nexus.broker import AgentBroker, BrokerSettings, QueueSettings
from nexus.ledger import Ledger, QueueItem
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with worker_and_manager(tmp_path / "agents.db") as opened:
        yield opened


async def test_a_reply_goes_back_to_an_agent_that_did_not_wait(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    runner.auto_finish = True
    broker.register_agent(WORKER)
    broker.register_agent(MANAGER)
    asked = message(1, "review auth.py", sender="manager")
    asked.metadata = {"reply_to": "manager", "hop": 1}
    await broker.send(asked)
    assert await broker.wait_for_idle("worker", timeout_ms=5000)
    assert await broker.wait_for_idle("manager", timeout_ms=5000)
    manager_runs = [run for run in runner.runs if run.request.agent_id == "manager"]
    assert [run.request.prompt for run in manager_runs] == ["[Message from worker]\nok"]
    rows = {row.message_id: row for row in BrokerStore(ledger.database).items()}
    assert rows["m-1:reply"].status == "delivered" and rows["m-1:reply"].sender == "worker"
    await broker.close()


async def test_an_ask_steered_into_a_running_turn_is_answered_by_that_turn(ledger: Ledger) -> None:
    """A message asking for a later reply (``metadata.reply_to``) that was steered into the running
    turn: that turn's reply goes back to the asker. Only the batch's messages were answered, so the
    steered ask waited, delivered and unanswered, until the broker's next start."""
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="steer"))
    broker.register_agent(WORKER)
    broker.register_agent(MANAGER)
    await broker.send(message(1))
    run = await runner.next_run(1)
    ask = message(2, "also check auth.py", sender="manager")
    ask.metadata = {"reply_to": "manager"}
    assert (await broker.send(ask)).steered
    run.finish(reply="auth.py is fine")
    answer = await runner.next_run(2)
    assert answer.request.agent_id == "manager" and answer.request.prompt == "[Message from worker]\nauth.py is fine"
    rows = {row.message_id: row for row in BrokerStore(ledger.database).items()}
    assert rows["m-2"].status == "delivered" and rows["m-2:reply"].sender == "worker"
    assert BrokerStore(ledger.database).unanswered_replies() == []
    answer.finish()
    await broker.close()


def _claimed_ask(ledger: Ledger) -> tuple[BrokerStore, QueueItem]:
    """A worker and its manager registered, and the manager's ask (reply later) taken by a worker's run."""
    store = BrokerStore(ledger.database)
    for agent in ("worker", "manager"):
        store.save_agent(agent, role=agent, session_label=f"agent:{agent}", spec={})
    asked = message(1, "review auth.py", sender="manager")
    asked.metadata = {"reply_to": "manager"}
    item, _ = store.accept(
        agent_id="worker", session_label="agent:worker", message_id="m-1", sender="manager",
        message=asked.to_json(), mode="followup",
    )  # fmt: skip
    store.claim([item.id])
    return store, item


async def _answer_from(turn_id: str) -> str:
    return f"answer from {turn_id}"


async def test_a_reply_a_crash_kept_from_being_sent_is_sent_on_start(ledger: Ledger) -> None:
    store, item = _claimed_ask(ledger)
    store.deliver([item.id], "turn-of-worker")  # the turn was written; then the process died
    runner = FakeRuntime(store)
    runner.auto_finish = True
    broker = AgentBroker(ledger, runner, BrokerSettings(), reply_text=_answer_from)
    await broker.start()
    run = await runner.next_run(1)
    assert run.request.agent_id == "manager" and run.request.prompt.endswith("answer from turn-of-worker")
    await broker.close()
    assert store.unanswered_replies() == []


async def test_an_ask_cut_by_crashes_until_it_failed_is_answered_failed_on_start(ledger: Ledger) -> None:
    """An ask whose runs a crash cut ``max_attempts`` times fails at the next start: its asker hears
    ``(failed: …)`` (docs/broker.md: never dropped). It used to wait for a reply no turn would write,
    its row flagged as waiting forever."""
    store, item = _claimed_ask(ledger)
    ledger.database.write(lambda c: c.execute("UPDATE queue_items SET attempts = 3 WHERE id = ?", (item.id,)))
    runner = FakeRuntime(store)
    runner.auto_finish = True
    broker = AgentBroker(ledger, runner, BrokerSettings(), reply_text=_answer_from)
    assert [failed.id for failed in await broker.start()] == [item.id]
    run = await runner.next_run(1)
    assert run.request.agent_id == "manager"
    assert (
        run.request.prompt
        == "[Message from worker]\n(failed: its run was cut 3 times (the process died); not retried again)"
    )
    await broker.close()
    assert store.unanswered_replies() == []


async def test_an_ask_whose_run_could_not_start_is_answered_failed(ledger: Ledger) -> None:
    """The worker's run could not start (no turn written): the ask fails and its asker is told so, live."""
    from fake_runtime import FakeResult

    from nexus.engine import AgentError

    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    broker.register_agent(WORKER)
    broker.register_agent(MANAGER)
    ask = message(1, "review auth.py", sender="manager")
    ask.metadata = {"reply_to": "manager"}
    await broker.send(ask)
    run = await runner.next_run(1)
    run.result.set_result(FakeResult("failed", None, error=AgentError("unknown", "model fake/gone is not configured")))
    answer = await runner.next_run(2)
    assert answer.request.agent_id == "manager"
    assert answer.request.prompt == "[Message from worker]\n(failed: model fake/gone is not configured)"
    rows = {row.message_id: row for row in BrokerStore(ledger.database).items()}
    assert rows["m-1"].status == "failed" and rows["m-1:reply"].sender == "worker"
    answer.finish()
    await broker.close()
