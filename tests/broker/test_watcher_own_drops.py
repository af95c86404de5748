"""The store watcher leaves alone the rows its own broker is dropping.

A message the queue's cap pushes out leaves its session's queue at once; its ``dropped`` status commits a moment
later. A look of the store watcher that read the queue in between saw the row still ``queued`` and held by no
session, took it for another process's message and queued it again: the dropped message was back in memory (its
row dropped), and under the cap it pushed out the newer message that had replaced it, which was then dropped for
good. Found as a rare failure of the ``summarize`` overflow test on PostgreSQL on a loaded machine ("Dropped 3
messages" where two were); made deterministic here: the watcher looks while the drop's write waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from fake_runtime import WORKER, FakeRuntime, message, open_broker

from nexus.broker import AgentBroker, QueueFullError, QueueOverrides, QueueSettings
from nexus.ledger import Ledger, NewSession, QueueStore


class LookDuringTheDrop:
    """The ledger's queue store; the first settle of rows as ``dropped`` lets the store watcher look first."""

    def __init__(self, queue: QueueStore, look: Callable[[], Awaitable[None]]) -> None:
        self.queue, self.look, self.looked = queue, look, False

    async def settle(self, item_ids: Sequence[str], outcome: str, **fields: Any) -> None:
        if outcome == "dropped" and not self.looked:
            self.looked = True
            await self.look()  # its read sees the row still queued: the drop has not committed
        await self.queue.settle(item_ids, outcome, **fields)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


async def _statuses(ledger: Ledger) -> list[str]:
    """The status of each row, in the order they were accepted."""
    rows = await ledger.database.run_read(
        lambda c: c.execute("SELECT status FROM queue_items ORDER BY rowid").fetchall()
    )
    return [str(row[0]) for row in rows]


async def _started(ledger: Ledger, policy: str) -> tuple[AgentBroker, FakeRuntime]:
    await ledger.sessions.ensure(NewSession(WORKER.session_label))
    broker, runner = await open_broker(ledger, queue=QueueSettings(mode="followup"), leases=False)
    broker.register_agent(WORKER, queue=QueueOverrides(cap=1, drop_policy=policy))  # type: ignore[arg-type]
    await broker.send(message(0))
    await runner.next_run(1)  # task 0 runs; the rest wait behind it, one at a time
    await broker.send(message(1))
    return broker, runner


@pytest.mark.parametrize("policy", ["summarize", "old"])
async def test_a_message_pushed_out_stays_out_when_the_watcher_looks_before_its_drop_commits(
    tmp_path: Path, policy: str
) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started(ledger, policy)
        broker._intake._queue = cast(QueueStore, LookDuringTheDrop(ledger.queue, broker._watcher.adopt))
        await broker.send(message(2))  # cap 1: task 2 pushes task 1 out; the watcher looks as that drop waits
        assert await _statuses(ledger) == ["processing", "dropped", "queued"]
        assert broker.get_queue_depth("worker") == 1, "task 2 alone waits: task 1 was not queued again"
        await broker._watcher.adopt()  # a later look, after the drop committed, leaves it too
        assert broker.get_queue_depth("worker") == 1
        runner.runs[0].finish()
        second = await runner.next_run(2)
        assert second.request.prompt.endswith("task 2")
        second.finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        assert len(runner.runs) == 2
        await broker.close()


async def test_a_message_the_cap_refuses_is_not_adopted_while_its_drop_waits(tmp_path: Path) -> None:
    """Policy ``new``: the sent message itself is refused, and its send fails; its row, no longer arriving, is
    not held by a session either until the drop commits. A look then, once task 1 has left the queue to run,
    found room for it: the message its sender was told was not queued would have run."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, runner = await _started(ledger, "new")

        async def look_once_task_1_runs() -> None:
            runner.runs[0].finish()
            await runner.next_run(2)
            await broker._watcher.adopt()

        broker._intake._queue = cast(QueueStore, LookDuringTheDrop(ledger.queue, look_once_task_1_runs))
        with pytest.raises(QueueFullError):
            await broker.send(message(2))
        assert await _statuses(ledger) == ["delivered", "processing", "dropped"]
        assert broker.get_queue_depth("worker") == 0, "task 2 was not queued again"
        runner.runs[1].finish()
        assert await broker.wait_for_idle("worker", timeout_ms=5000)
        assert [run.request.prompt for run in runner.runs] == ["task 0", "task 1"]
        await broker.close()
