"""The run line (``nexus.broker._scheduler``): fair turns under the cap, timers, a failing batch, close."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_runtime import FakeRun, FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore

AGENTS = ("a", "b", "c")


@pytest.fixture
def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        for agent in AGENTS:
            run_inline(opened.sessions.ensure(NewSession(f"agent:{agent}")))
        yield opened  # type: ignore[misc]


async def _broker(ledger: Ledger, runner: FakeRuntime, **settings: object) -> AgentBroker:
    broker = AgentBroker(ledger, runner, BrokerSettings(**settings))  # type: ignore[arg-type]
    await broker.start()
    for agent in AGENTS:
        broker.register_agent(AgentIdentity(agent, f"agent:{agent}"))
    return broker


def _send(agent: str, n: int) -> AgentMessage:
    return AgentMessage(id=f"{agent}-{n}", from_="user", to=agent, content=f"{agent}{n}")


async def test_sessions_take_turns_under_the_cap(ledger: Ledger) -> None:
    """Cap 1, three agents with three messages each: round robin, never one agent's whole queue first."""
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, max_concurrent=1, queue=QueueSettings(mode="followup"))
    for n in range(3):
        for agent in AGENTS:
            await broker.send(_send(agent, n))
    for count in range(1, 10):
        run = await runner.next_run(count)
        assert sum(r.state != "done" for r in runner.runs) == 1  # the cap: one run at a time
        run.finish()
    assert [r.request.prompt for r in runner.runs] == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
    await broker.wait_until_idle()
    await broker.close()


async def test_the_cap_bounds_runs_at_once_and_every_slot_is_used(ledger: Ledger) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, max_concurrent=2, queue=QueueSettings(mode="followup"))
    for agent in AGENTS:
        await broker.send(_send(agent, 0))
    await runner.next_run(2)
    await asyncio.sleep(0.02)
    assert len(runner.runs) == 2  # the third waits for a slot, its message still queued
    assert broker.get_queue_depth("c") == 1
    runner.runs[0].finish()
    third = await runner.next_run(3)
    assert third.request.prompt == "c0"
    for run in runner.runs[1:]:
        run.finish()
    await broker.wait_until_idle()
    await broker.close()


async def test_a_collect_batch_waits_for_its_quiet_window_then_runs_once(ledger: Ledger) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database), auto_finish=True)
    # a window long beside the gaps between the sends: at 60 ms a loaded machine let it close between two of them
    broker = await _broker(ledger, runner, queue=QueueSettings(mode="collect", debounce_ms=1000))
    for n in range(3):
        await broker.send(_send("a", n))
        await asyncio.sleep(0.02)  # each message moves the window on
    assert runner.runs == [] and broker.get_state("a") == "idle" and broker.get_queue_depth("a") == 3
    assert await broker.wait_for_idle("a", timeout_ms=30_000)
    assert len(runner.runs) == 1 and runner.runs[0].request.item_ids and len(runner.runs[0].request.item_ids) == 3
    await broker.close()


class _FailingOnce(FakeRuntime):
    """A runner whose ``start`` raises a bug (not a run failure) the first time it is called for agent ``a``."""

    failed = False

    def start(self, spec: Any, session: str, message: Any, **kwargs: Any) -> FakeRun:
        if spec.id == "a" and not self.failed:
            self.failed = True
            raise RuntimeError("bug in the runner")
        return super().start(spec, session, message, **kwargs)


async def test_a_batch_whose_run_fails_to_start_does_not_stop_the_other_sessions(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _FailingOnce(BrokerStore(ledger.database), auto_finish=True)
    broker = await _broker(ledger, runner, max_concurrent=1, queue=QueueSettings(mode="followup"))
    with caplog.at_level(logging.ERROR, logger="nexus.broker"):
        await broker.send(_send("a", 0))
        await broker.send(_send("b", 0))
        assert await broker.wait_for_idle("b", timeout_ms=30_000)
        assert await broker.wait_for_idle("a", timeout_ms=30_000)  # its items went back and ran again
    assert sorted(r.request.prompt for r in runner.runs) == ["a0", "b0"]
    await broker.close()


async def test_close_leaves_waiting_sessions_queued_and_stops_their_timers(ledger: Ledger) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, max_concurrent=1, queue=QueueSettings(mode="followup", debounce_ms=100))
    await broker.send(_send("a", 0))
    await broker.send(_send("b", 0))
    await broker.send(AgentMessage(id="c-0", from_="user", to="c", content="c0"), "collect")
    await runner.next_run(1)
    await broker.close()  # aborts a's run; b waits in line, c on its timer: neither may start now
    await asyncio.sleep(0.3)  # past c's quiet window
    assert [r.request.prompt for r in runner.runs] == ["a0"] and runner.runs[0].aborted
    store = BrokerStore(ledger.database)  # a-0 is in its aborted turn; the others wait for the next start
    assert sorted(item.message_id for item in store.pending()) == ["b-0", "c-0"]


async def test_a_step_that_raises_is_logged_and_not_retried_in_a_loop(caplog: pytest.LogCaptureFixture) -> None:
    """A bug in one batch: the other sessions go on, and the failing session is not spun on."""
    from nexus.broker._scheduler import DrainScheduler
    from nexus.broker._slot import AgentSlot, SessionSlot
    from nexus.broker.session_queue import QueuedMessage

    steps: list[str] = []

    async def step(slot: AgentSlot, session: SessionSlot) -> None:
        steps.append(slot.agent_id)
        if slot.agent_id == "bad":
            raise RuntimeError("bug")
        session.queue.clear()

    scheduler = DrainScheduler(1, step, lambda: 0, lambda slot, session: None)
    slots = [AgentSlot(AgentIdentity(name, f"agent:{name}"), {}) for name in ("bad", "good")]
    for slot in slots:
        session = slot.session(slot.identity.session_label)
        session.queue.restore(QueuedMessage("i-" + slot.agent_id, "m-" + slot.agent_id, "x", "followup", 0))
        scheduler.schedule(slot, session)
    with caplog.at_level(logging.ERROR, logger="nexus.broker"):
        for _ in range(20):
            await asyncio.sleep(0)
    assert steps == ["bad", "good"]
    assert "the batch of bad" in caplog.text
    bad = slots[0].sessions["agent:bad"]
    assert not bad.active and not bad.scheduled and not bad.idle.is_set()
    assert slots[1].sessions["agent:good"].idle.is_set()
    await scheduler.close()


async def test_a_full_disk_is_one_log_line_while_it_lasts_not_a_traceback_a_retry(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every failed batch is tried again each second: on a full disk ``nexus serve`` logged a 40-line traceback
    a second for as long as the disk stayed full. A known condition of the database is said once (then again
    after ``REPEAT_NOTICE_S``, with how many batches failed meanwhile); a bug keeps its traceback each time."""
    from nexus.broker import _scheduler
    from nexus.broker._scheduler import DrainScheduler
    from nexus.broker._slot import AgentSlot, SessionSlot
    from nexus.broker.session_queue import QueuedMessage
    from nexus.ledger import LedgerFullError

    monkeypatch.setattr(_scheduler, "RETRY_AFTER_S", 0.01)
    failures: list[Exception] = [LedgerFullError("cannot write to the ledger: the disk is full")] * 12
    failures += [RuntimeError("a bug")] * 2

    async def step(slot: AgentSlot, session: SessionSlot) -> None:
        if failures:
            raise failures.pop(0)
        session.queue.clear()

    scheduler = DrainScheduler(1, step, lambda: 0, lambda slot, session: None)
    slot = AgentSlot(AgentIdentity("w", "agent:w"), {})
    session = slot.session("agent:w")
    session.queue.restore(QueuedMessage("i-1", "m-1", "x", "followup", 0))
    with caplog.at_level(logging.WARNING, logger="nexus.broker"):
        scheduler.schedule(slot, session)
        for _ in range(500):
            if session.idle.is_set():
                break
            await asyncio.sleep(0.01)
    assert session.idle.is_set() and not failures, "the batch ran once the condition was over"
    full = [r for r in caplog.records if "disk is full" in r.getMessage()]
    assert len(full) == 1 and full[0].exc_info is None, [r.getMessage() for r in full]
    assert "batches wait in the ledger and are tried again every" in full[0].getMessage()
    bugs = [r for r in caplog.records if "failed; it is tried again" in r.getMessage()]
    assert len(bugs) == 2 and all(r.exc_info for r in bugs)
    await scheduler.close()


async def test_a_session_put_in_line_as_the_last_worker_ends_still_runs() -> None:
    """The worker leaves the worker set as it ends: a done callback would run an iteration later,
    and a session put in line in between found every slot taken and never ran (the broker hung)."""
    from nexus.broker._scheduler import DrainScheduler
    from nexus.broker._slot import AgentSlot, SessionSlot
    from nexus.broker.session_queue import QueuedMessage

    loop = asyncio.get_running_loop()
    ran: list[str] = []
    slots = [AgentSlot(AgentIdentity(name, f"agent:{name}"), {}) for name in ("a", "b")]
    sessions = [slot.session(slot.identity.session_label) for slot in slots]
    for slot, session in zip(slots, sessions, strict=True):
        session.queue.restore(QueuedMessage("i-" + slot.agent_id, "m-" + slot.agent_id, "x", "followup", 0))

    async def step(slot: AgentSlot, session: SessionSlot) -> None:
        ran.append(slot.agent_id)
        session.queue.clear()
        if slot.agent_id == "a":  # b arrives on the next iteration, as a's worker has just finished
            loop.call_soon(scheduler.schedule, slots[1], sessions[1])

    scheduler = DrainScheduler(1, step, lambda: 0, lambda slot, session: None)
    scheduler.schedule(slots[0], sessions[0])
    for _ in range(20):
        await asyncio.sleep(0)
    assert ran == ["a", "b"] and sessions[1].idle.is_set()
    await scheduler.close()


async def test_close_as_a_claim_commits_starts_no_run(ledger: Ledger) -> None:
    """close() while the worker's claim was committing: its aborts missed the run that claim would
    start, so close waited for a whole turn (forever with a run that never ends). Nothing starts;
    the item stays queued for the next broker, its attempt not counted."""
    runner = FakeRuntime(BrokerStore(ledger.database))  # runs end only when told: close must not wait for one
    broker = await _broker(ledger, runner, queue=QueueSettings(mode="followup"))
    await broker.send(_send("a", 0))
    closing = asyncio.get_running_loop().create_task(broker.close())  # the worker runs first: it takes the batch
    await asyncio.wait_for(closing, 5)
    assert runner.runs == []
    [item] = BrokerStore(ledger.database).pending()
    assert (item.message_id, item.status, item.attempts) == ("a-0", "queued", 0)


async def test_a_claim_refused_by_a_locked_database_is_retried_not_stranded(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holds the database past the write wait as a batch is claimed: the claim fails.
    The batch's items used to stay marked in flight: the message never ran (until the session's next
    one) and the session never counted as idle again. Now they wait again and the session is retried."""
    import subprocess
    import sys

    from nexus.broker import _scheduler

    monkeypatch.setenv("NEXUS_DB_WAIT_S", "0.1")
    monkeypatch.setattr(_scheduler, "RETRY_AFTER_S", 0.05, raising=False)
    runner = FakeRuntime(BrokerStore(ledger.database), auto_finish=True)
    broker = await _broker(ledger, runner, queue=QueueSettings(mode="followup"))
    holder = (
        "import sqlite3, sys, time\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(0.4); conn.execute('ROLLBACK')\n"
    )
    with caplog.at_level(logging.WARNING, logger="nexus.broker"):
        await broker.send(_send("a", 0))  # in line; its worker claims on the next iterations
        with subprocess.Popen(  # noqa: ASYNC220 - blocking on purpose: locked before the worker's claim runs
            [sys.executable, "-c", holder, str(ledger.database.path)], stdout=subprocess.PIPE, text=True
        ) as proc:
            assert proc.stdout is not None and proc.stdout.readline() == "locked\n"  # held before the claim
            assert await broker.wait_for_idle("a", timeout_ms=5000)
    assert "stayed locked" in caplog.text  # the claim did hit the lock
    assert [r.request.prompt for r in runner.runs] == ["a0"]
    assert BrokerStore(ledger.database).pending() == []
    await broker.close()


async def test_an_interrupt_sent_as_a_batch_is_claimed_is_not_run_after_it(ledger: Ledger) -> None:
    """An interrupt that arrives while the batch before it commits its claim finds no run to abort:
    that batch ran a whole turn, uninterrupted, and the interrupt waited for it. Now the batch goes
    back and runs with the interrupt, as its backlog, in one turn."""
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, queue=QueueSettings(mode="followup"))
    await broker.send(_send("a", 0))  # its worker claims on the next iteration, with the next send's accept
    await broker.send(_send("a", 1), "interrupt")
    run = await runner.next_run(1)
    assert run.request.prompt == "[Queued messages while agent was busy]\n\n---\nQueued #1\na0\n\n---\nQueued #2\na1"
    run.finish()
    assert await broker.wait_for_idle("a", timeout_ms=30_000)
    assert len(runner.runs) == 1
    await broker.close()


async def test_a_run_beside_the_queues_waits_for_a_seat_and_takes_turns_with_the_batches(ledger: Ledger) -> None:
    """Cap 1: a run started beside the queues (a chat completion in another session) waits while a batch
    runs, takes the seat after it (before the session's next batch), and the agent reads its state."""
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, max_concurrent=1, queue=QueueSettings(mode="followup"))
    await broker.send(_send("a", 0))
    await broker.send(_send("a", 1))
    first = await runner.next_run(1)
    beside = broker.run_beside("b", lambda tools: runner.begin(None, "chat-b", "beside"))  # type: ignore[arg-type,return-value]
    await asyncio.sleep(0.05)
    assert not beside.done() and len(runner.runs) == 1  # the seat is taken by a's batch
    first.finish()
    run = await beside
    assert run is runner.runs[1] and broker.get_state("b") == "streaming"
    await asyncio.sleep(0.05)
    assert len(runner.runs) == 2  # a's next batch waits for the seat
    assert broker.abort("b") is True
    (await runner.next_run(3)).finish()
    assert [r.request.prompt for r in runner.runs] == ["a0", "beside", "a1"]
    assert broker.get_state("b") == "idle"
    await broker.close()


async def test_close_ends_a_run_waiting_for_a_seat_without_starting_it(ledger: Ledger) -> None:
    runner = FakeRuntime(BrokerStore(ledger.database))
    broker = await _broker(ledger, runner, max_concurrent=1, queue=QueueSettings(mode="followup"))
    await broker.send(_send("a", 0))
    running = await runner.next_run(1)
    beside = broker.run_beside("b", lambda tools: runner.begin(None, "chat-b", "beside"))  # type: ignore[arg-type,return-value]
    await asyncio.sleep(0.02)
    await broker.close()
    assert await beside is None and running.aborted is not None and len(runner.runs) == 1
