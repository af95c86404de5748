"""100 concurrent deliveries to 10 adapter accounts: every stream_start...stream_end stays intact per target."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from adapter_helpers import MakeManager, adapter, script_command

from nexus.adapters.types import DeliveryTarget
from nexus.streaming.events import StreamEnd, StreamEvent, Token, ToolStatus
from nexus.streaming.router import StreamRouter
from nexus.testing import ManualClock

ACCOUNTS = 10
DELIVERIES = 100
TOKENS = 30


async def run_events(run_id: str) -> AsyncIterator[StreamEvent]:
    for i in range(TOKENS):
        yield Token(f"{run_id}:{i} ")
        if i == TOKENS // 2:
            yield ToolStatus("read", f"{run_id}-t", "started", "Reading x")
            yield StreamEnd(run_id, final=False)
        await asyncio.sleep(0)  # let the other deliveries interleave with this one
    yield StreamEnd(run_id, final=True)


async def test_concurrent_deliveries_are_never_interleaved(tmp_path: Path, make_manager: MakeManager) -> None:
    accounts = {f"acc{n}": {"config": {"record": str(tmp_path / f"acc{n}.jsonl")}} for n in range(ACCOUNTS)}
    # one process per account: the recorder appends every delivery of an account to one file
    recorder = adapter(command=script_command("recorder.py"), accounts=accounts, stream_processes=1)
    manager = make_manager({"rec": recorder})
    router = StreamRouter(manager, clock=ManualClock())

    async def one(n: int) -> None:
        target = DeliveryTarget("rec", f"acc{n % ACCOUNTS}", f"user:{n}")
        report = await router.deliver(target, run_events(f"run{n}"), run_id=f"run{n}", session_label=f"s{n}")
        assert report.ok, report

    await asyncio.gather(*(one(n) for n in range(DELIVERIES)))

    seen: set[str] = set()
    for account in range(ACCOUNTS):
        lines = [json.loads(line) for line in (tmp_path / f"acc{account}.jsonl").read_text().splitlines()]
        deliveries = split_deliveries(lines)
        assert len(deliveries) == DELIVERIES // ACCOUNTS
        for delivery in deliveries:
            start = delivery[0]
            run_id = start["runId"]
            assert start["target"]["to"] == f"user:{run_id[3:]}"
            assert int(run_id[3:]) % ACCOUNTS == account
            tokens = [e["text"] for e in delivery if e["type"] == "token"]
            assert tokens == [f"{run_id}:{i} " for i in range(TOKENS)], "a delivery holds its own tokens, in order"
            assert [e.get("final") for e in delivery if e["type"] == "stream_end"] == [False, True]
            seen.add(run_id)
        process = await manager.stream_process("rec", f"acc{account}")
        assert process.supervisor.starts == 1, "one long-running process per account"
    assert seen == {f"run{n}" for n in range(DELIVERIES)}


def split_deliveries(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    deliveries: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    for event in lines:
        if event["type"] == "stream_start":
            assert current is None, "a delivery started before the previous one ended"
            current = [event]
            continue
        assert current is not None, f"{event['type']} outside a delivery"
        current.append(event)
        if event["type"] == "stream_error" or (event["type"] == "stream_end" and event.get("final", True)):
            deliveries.append(current)
            current = None
    assert current is None, "the last delivery never ended"
    return deliveries
