"""The ``[Queue overflow]`` summary is stored with the queue: it outlives the broker that dropped the messages.

A stranger's trial: the summary lived only in the memory of that broker, so a process that died between the
drop and the next turn (or another broker running that turn, under leases) lost it, and the agent never
learnt that messages had been dropped. Now the dropped rows are marked in the ledger (``overflow_cap``), the
turn that runs next takes them (once), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from fake_runtime import WORKER, message, open_broker

from nexus.broker import AgentBroker, AgentMessage, BrokerSettings, QueueOverrides, QueueSettings
from nexus.ledger import Ledger, NewSession
from nexus.ledger._queue_store import SqlQueueStore
from nexus.testing.broker_runtime import ScriptedRuntime
from nexus.testing.faults import register

SUMMARY = "[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- task 2"
Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens the test's ledger (a new connection each time: a new process's)."""
    where = str(tmp_path / "agents.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")

    @asynccontextmanager
    async def opened() -> AsyncIterator[Ledger]:
        async with await Ledger.connect(where) as ledger:
            await ledger.sessions.ensure(NewSession(WORKER.session_label))
            yield ledger

    return opened


async def _owed(ledger: Ledger) -> dict[str, int | None]:
    rows = await ledger.database.run_read(
        lambda c: c.execute("SELECT message_id, overflow_cap FROM queue_items WHERE status = 'dropped'").fetchall()
    )
    return {str(row[0]): row[1] for row in rows}


async def _told(ledger: Ledger, session_label: str) -> None:
    """The summary was told: no later turn is given it, and the next look clears the marks."""
    assert await ledger.queue.take_overflow(session_label, ["a later message"]) == []
    assert set((await _owed(ledger)).values()) == {None}


def _crash(broker: AgentBroker) -> None:
    """What a killed process leaves: its tasks stop where they are, nothing is closed or settled."""
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task() and not task.done():
            task.cancel()
    del broker


async def test_the_summary_survives_the_broker_that_dropped_the_messages(open_ledger: Opener) -> None:
    settings: dict[str, object] = {"queue": QueueSettings(mode="followup"), "leases": False}  # leases: below
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="summarize"))
        await broker.send(message(0))
        await runner.next_run(1)  # task 0 runs; the rest wait behind it
        for n in (1, 2, 3):  # cap 1: task 2 pushes task 1 out, task 3 pushes task 2 out
            await broker.send(message(n))
        assert await _owed(ledger) == {"m-1": 1, "m-2": 1}, "the drops are owed to the next turn, in the ledger"
        _crash(broker)  # between the drop and the turn that would have told the agent
        await asyncio.sleep(0)
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        first = await runner.next_run(1)  # the cut task 0 runs again, first: the next turn
        assert first.request.prompt == f"{SUMMARY}\n\ntask 0"
        first.finish()
        second = await runner.next_run(2)
        assert second.request.prompt == "task 3", "told once"
        second.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        await broker.close()
        await _told(ledger, WORKER.session_label)


async def test_a_look_for_other_processes_rows_while_a_drop_is_written_loads_none_of_them_back(
    open_ledger: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store watcher may look while a send's drop is being written: the row the cap has just pushed out of the
    session's queue still reads ``queued`` in the ledger and this broker no longer holds it. Loaded back as another
    process's message, it pushed the newest message out in its turn (cap 1), and the first turn after the restart
    above told of 3 dropped messages, not 2 (about one CI run in three, seen on PostgreSQL). Here every drop's write
    waits for a look first. The watcher's own looks are turned off: on PostgreSQL each accept's notification made
    one happen at once, often while that send's drop was being written (hence the failures there), and here one
    would move the watcher past the rows before the looks this test makes."""
    settings: dict[str, object] = {
        "queue": QueueSettings(mode="followup"), "leases": False, "wakeups": "poll", "poll_ms": 3_600_000,
    }  # fmt: skip
    looks: list[str] = []
    settle = SqlQueueStore.settle

    async def looked_first(self: SqlQueueStore, item_ids: list[str], outcome: str, **kwargs: Any) -> Any:
        if outcome == "dropped" and "looking" not in looks[-1:]:  # not again for a drop the look itself makes
            looks.append("looking")
            await broker._watcher.adopt()
            looks.append("looked")
        return await settle(self, item_ids, outcome, **kwargs)  # type: ignore[arg-type]

    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="summarize"))
        await broker.send(message(0))
        await runner.next_run(1)
        monkeypatch.setattr(SqlQueueStore, "settle", looked_first)
        for n in (1, 2, 3):
            await broker.send(message(n))
            waiting = await ledger.queue.items(agent_id="worker", statuses=["queued"])
            assert [item.message_id for item in waiting] == [f"m-{n}"], "the newest message waits, alone"
            assert broker.get_queue_depth("worker") == 1
        assert looks == ["looking", "looked"] * 2, "a look came in every drop's write"
        assert await _owed(ledger) == {"m-1": 1, "m-2": 1}
        monkeypatch.undo()
        _crash(broker)
        await asyncio.sleep(0)
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        first = await runner.next_run(1)
        assert first.request.prompt == f"{SUMMARY}\n\ntask 0"
        first.finish()
        second = await runner.next_run(2)
        assert second.request.prompt == "task 3"
        second.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        await broker.close()


async def test_a_turn_cut_while_telling_the_summary_tells_it_again_when_retried(open_ledger: Opener) -> None:
    """The summary is carried by the message whose turn took it until that message is finished: the process died
    during that turn, and the turn that runs it again still starts with the summary; a later one does not."""
    settings: dict[str, object] = {"queue": QueueSettings(mode="followup"), "leases": False}
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="summarize"))
        await broker.send(message(0))
        first = await runner.next_run(1)
        for n in (1, 2, 3):
            await broker.send(message(n))
        first.finish()
        telling = await runner.next_run(2)
        assert telling.request.prompt == f"{SUMMARY}\n\ntask 3"
        _crash(broker)  # during the turn that tells it
        await asyncio.sleep(0)
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        retried = await runner.next_run(1)
        assert retried.request.prompt == f"{SUMMARY}\n\ntask 3", "the cut turn's retry tells it again"
        retried.finish()
        await broker.send(message(4))
        later = await runner.next_run(2)
        assert later.request.prompt == "task 4"
        later.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        await broker.close()


async def test_another_broker_runs_the_next_turn_under_leases_and_tells_it(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several brokers on one PostgreSQL database: the one that dropped the messages is not the one that runs the
    session's next turn (it stopped here; any other may hold the session's lease next).

    The running broker takes the summary with its batches' claims: a batch of a new tenure (a lease released and
    taken again: every batch of a session whose queue ran empty) once cost a read of its own before its claim."""
    looks: list[str] = []
    take_overflow = SqlQueueStore.take_overflow

    async def counted(self: SqlQueueStore, session_label: str, *args: Any, **kwargs: Any) -> Any:
        looks.append(session_label)
        return await take_overflow(self, session_label, *args, **kwargs)

    monkeypatch.setattr(SqlQueueStore, "take_overflow", counted)
    # A long lease: the test is about the summary, not expiry. With 1.5 s (renewed every 0.5 s, the store watcher
    # sweeping every 0.75 s) a run at load 15+ once ended its sends with m-2 and m-3 both queued under cap 1 (about
    # one run in fifteen at that load; not reproduced with 10 s). A late renewal is the likely cause, not proven.
    settings = BrokerSettings(
        queue=QueueSettings(mode="followup", cap=1, drop_policy="summarize"), leases=True, lease_ttl_ms=10_000
    )
    async with await Ledger.connect(postgres_url) as ledger:
        await register(ledger, 1)
        dropping = AgentBroker(ledger, cast(Any, ScriptedRuntime(ledger, 30.0)), settings)
        await dropping.start()
        for n in range(4):  # task 0 runs (for 30 s); cap 1: task 2 pushes task 1 out, task 3 pushes task 2 out
            await dropping.send(AgentMessage(id=f"m-{n}", from_="user", to="a0", content=f"task {n}"))
        assert await _owed(ledger) == {"m-1": 1, "m-2": 1}
        await dropping.close()  # task 0's run is aborted (kept as an aborted turn); task 3 waits, durable
    async with await Ledger.connect(postgres_url) as ledger:
        running = AgentBroker(ledger, cast(Any, ScriptedRuntime(ledger, 0.01)), settings)
        await running.start()
        for _ in range(200):
            if not await ledger.queue.pending():
                break
            await asyncio.sleep(0.05)
        await running.close()
        asked = [str(message.content) for message in await ledger.turns.history("agent:a0") if message.role == "user"]
        assert asked == ["task 0", f"{SUMMARY}\n\ntask 3"], asked
        assert looks == [], "no batch looked for a summary outside its claim"
        await _told(ledger, "agent:a0")


async def _claim_elsewhere(ledger: Ledger, message_id: str) -> None:
    """What another broker's claim leaves on a row: ``processing``, stamped with that broker."""
    await ledger.database.run_write(
        lambda c: c.execute(
            "UPDATE queue_items SET status = 'processing', attempts = 1, claimed_by = 'elsewhere:1'"
            " WHERE message_id = ?",
            (message_id,),
        )
    )


async def _statuses(ledger: Ledger) -> dict[str, str]:
    rows = await ledger.database.run_read(lambda c: c.execute("SELECT message_id, status FROM queue_items").fetchall())
    return {str(row[0]): str(row[1]) for row in rows}


async def test_the_cap_never_drops_a_message_another_broker_is_running(open_ledger: Opener) -> None:
    """Several brokers on one database: each caps what it accepts, from its own view of the queue, and that view
    may still hold a message another broker has claimed and is running. Pushed out of it, the message was marked
    ``dropped`` while its turn ran there (both answered and dropped), and the next turn was told of a drop that
    never happened. Only a waiting row is dropped: the one running elsewhere stays that broker's."""
    settings: dict[str, object] = {"queue": QueueSettings(mode="followup"), "leases": False}
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy="summarize"))
        await broker.send(message(0))
        first = await runner.next_run(1)  # task 0 runs; task 1 waits behind it, in this broker's view
        await broker.send(message(1))
        await _claim_elsewhere(ledger, "m-1")  # another broker took task 1 meanwhile
        await broker.send(message(2))  # cap 1: task 1 is pushed out of this view
        assert (await _statuses(ledger))["m-1"] == "processing", "the other broker's run still holds it"
        assert await _owed(ledger) == {}, "nothing was dropped"
        first.finish()
        second = await runner.next_run(2)
        assert second.request.prompt == "task 2", "no summary of a drop that did not happen"
        second.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        await broker.close()
        assert (await _statuses(ledger))["m-1"] == "processing"


async def test_clearing_a_queue_leaves_a_message_another_broker_is_running(open_ledger: Opener) -> None:
    """``clear_queue`` (``nexus queue clear``, ``DELETE /v1/agents/{id}/queue``) drops what waits; a message in
    this broker's view that another broker claimed meanwhile is that broker's run, not dropped and not counted."""
    settings: dict[str, object] = {"queue": QueueSettings(mode="followup"), "leases": False}
    async with open_ledger() as ledger:
        broker, runner = await open_broker(ledger, **settings)
        broker.register_agent(WORKER)
        await broker.send(message(0))
        first = await runner.next_run(1)
        for n in (1, 2):
            await broker.send(message(n))
        await _claim_elsewhere(ledger, "m-1")
        assert await broker.clear_queue("worker") == 1, "task 2 only"
        statuses = await _statuses(ledger)
        assert (statuses["m-1"], statuses["m-2"]) == ("processing", "dropped"), statuses
        first.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        await broker.close()
