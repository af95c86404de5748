"""Per-session queues: one agent serves many sessions, one run per session, each with its own queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_runtime import FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerError, BrokerSettings, QueueSettings
from nexus.broker.sessions import session_label_for
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore

BOT = AgentIdentity("bot", "agent:bot", "worker")


def message(n: int, session: str | None, content: str | None = None) -> AgentMessage:
    return AgentMessage(id=f"m-{n}", from_="user", to="bot", content=content or f"task {n}", session=session)


@pytest.fixture
def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("agent:bot")))
        yield opened  # type: ignore[misc]


async def open_broker(ledger: Ledger, **settings: object) -> tuple[AgentBroker, FakeRuntime]:
    store = BrokerStore(ledger.database)
    runner = FakeRuntime(store)
    broker = AgentBroker(ledger, runner, BrokerSettings(**settings))  # type: ignore[arg-type]
    broker.register_agent(BOT)
    await broker.start()
    return broker, runner


def test_a_session_key_maps_to_a_stable_safe_label() -> None:
    assert session_label_for("bot", "agent:bot", None) == "agent:bot"
    assert session_label_for("bot", "agent:bot", "agent:bot") == "agent:bot"
    assert session_label_for("bot", "agent:bot", "dm:telegram:42") == "bot~dm~telegram~42"
    odd = session_label_for("bot", "agent:bot", "group:slack:C1/../x:thread:1 2")
    assert odd == session_label_for("bot", "agent:bot", "group:slack:C1/../x:thread:1 2")  # stable
    assert "/" not in odd and " " not in odd and "!" in odd and odd.startswith("bot~group~slack~")
    # a key with "~" cannot pose as another key's label: it takes the hashed form
    assert session_label_for("bot", "agent:bot", "dm~telegram~42") != "bot~dm~telegram~42"
    for bad in ("", "  ", "dm:x:\n1", "k" * 600):
        with pytest.raises(BrokerError):
            session_label_for("bot", "agent:bot", bad)


async def test_sessions_of_one_agent_run_at_once_one_run_each(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    await broker.send(message(1, "dm:telegram:1"))
    await broker.send(message(2, "dm:telegram:2"))
    await broker.send(message(3, "dm:telegram:1"))  # waits for session 1's first run
    first, second = await runner.next_run(1), await runner.next_run(2)
    assert {first.request.session_label, second.request.session_label} == {"bot~dm~telegram~1", "bot~dm~telegram~2"}
    assert {first.request.session_key, second.request.session_key} == {"dm:telegram:1", "dm:telegram:2"}
    assert broker.get_queue_depth("bot") == 1
    assert broker.get_queue_depth("bot", session="dm:telegram:1") == 1
    assert broker.get_queue_depth("bot", session="dm:telegram:2") == 0
    assert broker.get_state("bot") == "streaming" and broker.get_state("bot", session="dm:telegram:9") == "idle"
    one = first if first.request.session_key == "dm:telegram:1" else second
    one.finish()
    third = await runner.next_run(3)
    assert third.request.session_label == "bot~dm~telegram~1" and third.request.prompt == "task 3"
    for run in runner.runs:
        run.finish()
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    session = await ledger.sessions.get("bot~dm~telegram~1")
    assert session.routing_key == "dm:telegram:1"
    rows = BrokerStore(ledger.database).items(agent_id="bot")
    assert {(row.session_label, row.status) for row in rows} == {
        ("bot~dm~telegram~1", "delivered"),
        ("bot~dm~telegram~2", "delivered"),
    }
    await broker.close()


async def test_the_global_cap_still_bounds_runs_over_sessions(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, max_concurrent=2, queue=QueueSettings(mode="followup"))
    for n in range(5):
        await broker.send(message(n, f"dm:x:{n}"))
    await runner.next_run(2)
    assert len(runner.runs) == 2 and broker.get_queue_depth("bot") == 3
    runner.auto_finish = True
    for run in list(runner.runs):
        run.finish()
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    assert len(runner.runs) == 5
    await broker.close()


async def test_modes_act_on_the_run_of_their_own_session(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="steer"))
    await broker.send(message(1, "dm:x:a"))
    run_a = await runner.next_run(1)
    steered = await broker.send(message(2, "dm:x:a", "use tabs"))
    other = await broker.send(message(3, "dm:x:b", "hello"))
    assert steered.steered and not other.steered  # b has no run to steer: it gets its own
    run_b = await runner.next_run(2)
    assert run_b.request.session_key == "dm:x:b" and [s.text for s in run_a.steers] == ["use tabs"]
    interrupt = AgentMessage(id="m-4", from_="user", to="bot", content="stop", session="dm:x:b")
    await broker.interrupt("bot", interrupt)
    assert run_b.aborted and run_a.aborted is None
    assert broker.abort("bot", session="dm:x:a") and run_a.aborted
    runner.auto_finish = True
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    await broker.close()


async def test_clear_queue_per_session_and_for_the_agent(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    for n, key in enumerate(["dm:x:a", "dm:x:a", "dm:x:a", "dm:x:b", "dm:x:b", None]):
        await broker.send(message(n, key))
    await runner.next_run(3)  # one run per session (a, b and the agent's own)
    assert await broker.clear_queue("bot", session="dm:x:a") == 2
    assert await broker.clear_queue("bot") == 1
    assert broker.get_queue_depth("bot") == 0
    runner.auto_finish = True
    for run in list(runner.runs):
        run.finish()
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    await broker.close()


async def test_send_is_idempotent_across_sessions_and_restarts(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    await broker.send(message(1, "dm:x:a"))
    await broker.send(message(2, "dm:x:b"))
    await runner.next_run(2)
    await broker.send(message(3, "dm:x:a"))
    again = await broker.send(message(1, "dm:x:b"))  # the same id: the first acceptance stands
    assert again.duplicate
    await broker.close()  # the two runs end aborted (their turns consume 1 and 2); 3 stays queued

    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    runner.auto_finish = True
    assert (await broker.send(message(3, "dm:x:a"))).duplicate
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    ran = [(run.request.session_label, run.request.session_key, run.request.prompt) for run in runner.runs]
    assert ran == [("bot~dm~x~a", "dm:x:a", "task 3")]  # reloaded into its own session, with its key
    rows = BrokerStore(ledger.database).items(agent_id="bot")
    assert sorted(row.status for row in rows) == ["delivered"] * 3
    await broker.close()


async def test_a_label_owned_by_another_session_is_refused(ledger: Ledger) -> None:
    await ledger.sessions.ensure(NewSession("bot~dm~x~a"))  # a user's session that happens to have the label
    broker, _ = await open_broker(ledger)
    with pytest.raises(BrokerError, match="is not the session of key"):
        await broker.send(message(1, "dm:x:a"))
    assert BrokerStore(ledger.database).items(agent_id="bot") == []
    await broker.close()


async def test_quiet_sessions_keep_no_task_or_queue(ledger: Ledger) -> None:
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"))
    runner.auto_finish = True
    baseline = len(asyncio.all_tasks())
    for n in range(60):
        await broker.send(message(n, f"dm:x:{n}"))
    assert await broker.wait_for_idle("bot", timeout_ms=5000)
    for _ in range(3):
        await asyncio.sleep(0)  # the finished drains return
    assert len(asyncio.all_tasks()) <= baseline  # nothing parked per chat that has gone quiet
    assert len(runner.runs) == 60 and broker.get_queue_depth("bot") == 0
    await broker.send(message(100, "dm:x:7"))  # a quiet chat that speaks again gets a drain again
    assert await broker.wait_for_idle("bot", timeout_ms=30_000)
    assert runner.runs[-1].request.session_label == "bot~dm~x~7"
    await broker.close()
