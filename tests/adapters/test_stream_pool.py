"""An account's pool of ``stream`` processes: extra ones stop when idle, and health sees every one.

Real adapter processes (``scripts/recorder.py``) and real signals; deliveries are held open with an
event so the pool has to grow.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from adapter_helpers import MakeManager, adapter, events_of, script_command

from nexus.adapters.manager import AdapterManager
from nexus.adapters.supervisor import RestartPolicy
from nexus.adapters.types import DeliveryTarget
from nexus.streaming.events import StreamEnd, StreamEvent, Token
from nexus.streaming.router import StreamRouter


async def held(release: asyncio.Event, run_id: str) -> AsyncIterator[StreamEvent]:
    yield Token(f"{run_id} starts ")
    await release.wait()
    yield StreamEnd(run_id, final=True)


async def until(check: object, what: str, timeout_s: float = 20.0) -> None:
    assert callable(check)
    for _ in range(int(timeout_s / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def recorder_manager(make_manager: MakeManager, tmp_path: Path, **fields: object) -> AdapterManager:
    accounts = {"x": {"config": {"record": str(tmp_path / "lines.jsonl")}}}
    return make_manager({"rec": adapter(command=script_command("recorder.py"), accounts=accounts, **fields)})


async def burst(router: StreamRouter, manager: AdapterManager, chats: int) -> list[int]:
    """``chats`` deliveries at once to different chats; returns the pids of the processes that took them."""
    release = asyncio.Event()
    targets = [DeliveryTarget("rec", "x", f"chat{n}") for n in range(chats)]
    runs = [asyncio.create_task(router.deliver(t, held(release, f"r{n}"))) for n, t in enumerate(targets)]
    pool = await manager.stream_pool("rec", "x")
    await until(lambda: sum(p.current is not None for p in pool.processes) == chats, f"{chats} deliveries running")
    pids = [p.supervisor.proc.pid for p in pool.processes if p.supervisor.proc is not None]
    release.set()
    reports = await asyncio.gather(*runs)
    assert all(report.ok for report in reports), reports
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_extra_processes_stop_when_idle_and_the_first_stays(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = recorder_manager(make_manager, tmp_path, stream_processes=3, stream_idle_s=0.3)
    router = StreamRouter(manager)
    pool = await manager.stream_pool("rec", "x")

    first_burst = await burst(router, manager, 3)
    assert len(first_burst) == 3
    await until(lambda: len(pool.processes) == 1, "the two extra processes to stop")
    assert pool.stopped_idle == 2
    await until(lambda: sum(alive(pid) for pid in first_burst) == 1, "their OS processes to exit")
    assert pool.processes[0].supervisor.running, "the first process stays up for the next delivery"

    second_burst = await burst(router, manager, 3)  # the pool grows again as needed
    assert len(set(second_burst) - set(first_burst)) == 2
    await until(lambda: len(pool.processes) == 1, "the extra processes of the second burst to stop")


async def test_idle_zero_keeps_every_process(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = recorder_manager(make_manager, tmp_path, stream_processes=2, stream_idle_s=0)
    router = StreamRouter(manager)
    pids = await burst(router, manager, 2)
    await asyncio.sleep(0.5)
    pool = await manager.stream_pool("rec", "x")
    assert len(pool.processes) == 2 and all(alive(pid) for pid in pids)


async def test_health_names_a_failed_process_that_is_not_the_first(tmp_path: Path, make_manager: MakeManager) -> None:
    accounts = {"x": {"config": {"record": str(tmp_path / "lines.jsonl")}}}
    config = adapter(command=script_command("recorder.py"), accounts=accounts, stream_processes=2)
    manager = make_manager({"rec": config}, policy=RestartPolicy(max_restarts=0, stop_grace_s=1.0))
    router = StreamRouter(manager)
    pool = await manager.stream_pool("rec", "x")
    await burst(router, manager, 2)
    second = pool.processes[1]
    assert second.supervisor.proc is not None
    os.kill(second.supervisor.proc.pid, signal.SIGKILL)
    await until(lambda: second.supervisor.state == "backoff", "the reader to see the kill")

    hold = asyncio.Event()  # the first process busy, so the next chat's delivery goes to the second
    busy = asyncio.create_task(router.deliver(DeliveryTarget("rec", "x", "chat0"), held(hold, "busy")))
    await until(lambda: pool.processes[0].current is not None, "the first process to be busy")
    report = await router.deliver(DeliveryTarget("rec", "x", "chat1"), events_of([Token("lost"), StreamEnd("lost")]))
    assert not report.ok and "gave up" in (report.error or "")

    health = await manager.health("rec", "x")
    assert not health.ok and health.state == "failed"
    assert health.detail.startswith("stream process 2 of 2:"), health.detail
    hold.set()
    assert (await busy).ok
