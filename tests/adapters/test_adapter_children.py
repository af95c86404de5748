"""An adapter that leaves a child running, holding its pipes (``cmd &`` in a shell adapter).

Real processes (``scripts/forking.py``): the adapter answers or exits, while a child it started
keeps its stdout open for minutes. The adapter's exit, not the end of its output, is what ends a
command or a long-running process; what is left of its process group (holding the pipes and
the context with the credential) is ended with it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapter_helpers import MakeManager, adapter, events_of, script_command

from nexus.adapters.manager import AdapterManager
from nexus.adapters.supervisor import RestartPolicy
from nexus.adapters.types import DeliveryTarget
from nexus.streaming.events import StreamEnd, Token
from nexus.streaming.router import StreamRouter


def _left(pids: Path) -> list[int]:
    """The children of ``pids`` still running (a zombie is not running)."""
    running = []
    for pid in (int(line) for line in pids.read_text().split()):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    running.append(pid)
        except FileNotFoundError:
            pass
    return running


async def _until_gone(pids: Path) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while _left(pids):
        assert asyncio.get_running_loop().time() < deadline, f"children still running: {_left(pids)}"
        await asyncio.sleep(0.05)


def _manager(make_manager: MakeManager, pids: Path, **fields: object) -> AdapterManager:
    config = {"pids": str(pids)}
    return make_manager(
        {"f": adapter(command=script_command("forking.py"), accounts={"a": {"config": config}}, **fields)},
        policy=RestartPolicy(base_s=0.01, stop_grace_s=1.0),
    )


async def test_a_send_that_leaves_a_child_holding_its_stdout_is_answered_when_the_adapter_exits(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    pids = tmp_path / "pids"
    manager = _manager(make_manager, pids, timeout_s=10)
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert result.success and result.message_ids == ["f1"], result.error  # not "no answer within 10 s"
    await _until_gone(pids)  # the child with the credential's descriptor does not outlive it


async def test_a_stream_process_that_exits_while_its_child_holds_stdout_fails_the_delivery_with_its_exit(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    pids = tmp_path / "pids"
    manager = _manager(make_manager, pids)
    router = StreamRouter(manager, finish_timeout_s=60)
    report = await router.deliver(DeliveryTarget("f", "a", "u"), events_of([Token("hello"), StreamEnd("r1")]))
    assert report.status == "failed" and "exited with code 3" in (report.error or ""), report.error
    await _until_gone(pids)


async def test_a_monitor_that_exits_while_its_child_holds_stdout_is_restarted(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    pids = tmp_path / "pids"
    manager = _manager(make_manager, pids)
    seen: list[str] = []

    async def read() -> None:
        async for event in manager.monitor("f", "a"):
            seen.append(event.event_id)
            if len(seen) == 2:
                return

    await asyncio.wait_for(read(), 60)
    assert seen == ["start-1", "start-2"]
    first_child = int(pids.read_text().split()[0])
    assert first_child not in _left(pids), "the exited monitor's child was ended with it"
