"""A full disk under a running broker (a real tmpfs): messages other processes queued still run.

The store watcher adopts rows another process committed; a steer it adopts while the session runs
is claimed before it is handed to the run, and a row it cannot read is marked failed. On a full
disk both writes fail: the steer used to stay in memory marked in flight with no run holding it
(never run until a restart), and an error ended the watcher for good (nothing another process
queued was picked up again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from fake_runtime import FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker._watcher import WATCH_INTERVAL_S
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sqlite import Database
from nexus.ledger.broker_store import BrokerStore


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; returns the filler (remove it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    return filler


def _accept(store: BrokerStore, n: int, mode: str, content: str | None = None) -> None:
    """Queue a message the way another process (``nexus send``) does: straight into the store."""
    body = AgentMessage(id=f"m-{n}", from_="user", to="worker", content=content or f"task {n}").to_json()
    store.accept(agent_id="worker", session_label="agent:worker", message_id=f"m-{n}", sender="user",
                 message=body, mode=mode)  # fmt: skip


async def test_a_steer_adopted_while_the_disk_is_full_runs_later_and_the_watcher_goes_on(
    tmpfs: Callable[[str], Path],
) -> None:
    disk = tmpfs("2m")
    with Ledger.open(disk / "agents.db") as ledger:
        await ledger.sessions.ensure(NewSession("agent:worker"))
        store = BrokerStore(ledger.database)
        runner = FakeRuntime(store)
        broker = AgentBroker(ledger, runner, BrokerSettings(queue=QueueSettings(mode="followup")))
        await broker.start()
        broker.register_agent(AgentIdentity("worker", "agent:worker", "worker"))
        await broker.send(AgentMessage(id="m-1", from_="user", to="worker", content="task 1"))
        first = await runner.next_run(1)
        other = Database(disk / "agents.db")  # another process's connection
        try:
            _accept(BrokerStore(other), 2, "steer")
            _accept(BrokerStore(other), 9, "followup", content=" ")  # unreadable: failed as the watcher meets it
            filler = _fill(disk)
            await asyncio.sleep(WATCH_INTERVAL_S * 3)  # the watcher adopts the steer: its claim finds no room,
            # nor can the unreadable row be marked failed
            filler.unlink()
            assert first.steers == []  # not handed to the run: it waits for its own turn
            first.finish()
            second = await runner.next_run(2)
            assert second.request.prompt == "task 2"
            second.finish()
            _accept(BrokerStore(other), 3, "followup")  # the watcher still looks
            third = await runner.next_run(3)
            assert third.request.prompt == "task 3"
            third.finish()
            assert await broker.wait_for_idle("worker", timeout_ms=30_000)
        finally:
            other.close()
            await broker.close()
        statuses = {item.message_id: item.status for item in store.items(agent_id="worker")}
        assert statuses == {"m-1": "delivered", "m-2": "delivered", "m-3": "delivered", "m-9": "failed"}
