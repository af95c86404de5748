"""The native path: StreamEvents as JSONL on a long-running ``stream`` process per account."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from adapter_helpers import MakeManager, adapter, events_of, script_command

from nexus.adapters.types import DeliveryTarget
from nexus.streaming.events import Reasoning, StreamEnd, StreamEvent, StreamStart, Token, ToolStatus
from nexus.streaming.router import StreamRouter
from nexus.testing import ManualClock


def reply(run_id: str, target: DeliveryTarget) -> list[StreamEvent]:
    return [
        StreamStart(run_id, "main", target),
        Token("Let me "),
        Token("check."),
        ToolStatus("read", "tc_1", "started", "Reading package.json"),
        ToolStatus("read", "tc_1", "completed", "Read package.json"),
        StreamEnd(run_id, final=False),
        Reasoning("hidden thoughts"),
        Token(" The version is 2.1.0."),
        StreamEnd(run_id, final=True),
    ]


async def test_jsonl_adapter_gets_whole_deliveries_from_one_process(tmp_path: Path, make_manager: MakeManager) -> None:
    out = tmp_path / "deliveries.jsonl"
    manager = make_manager({"files": adapter(builtin="jsonl", accounts={"a": {"config": {"path": str(out)}}})})
    router = StreamRouter(manager, clock=ManualClock())
    target = DeliveryTarget("files", "a", "chat:1", thread_id="t9")

    first = await router.deliver(target, events_of(reply("run1", target)))
    second = await router.deliver(target, events_of(reply("run2", target)))

    assert first.ok and second.ok, (first, second)
    assert first.path == "native" and len(first.message_ids) == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["run_id"] for r in records] == ["run1", "run2"]
    assert records[0]["text"] == "Let me check. The version is 2.1.0."
    assert records[0]["target"] == {"channel": "files", "account_id": "a", "to": "chat:1", "thread_id": "t9"}
    assert records[0]["tools"] == [
        ["read", "started", "Reading package.json"],
        ["read", "completed", "Read package.json"],
    ]
    assert "reasoning" not in records[0]["events"], "reasoning goes only to adapters that ask for it"
    assert records[0]["events"][-2:] == ["token", "stream_end"]
    process = await manager.stream_process("files", "a")
    assert process.supervisor.starts == 1 and process.deliveries == 2


async def test_router_frames_a_source_without_start_or_end(tmp_path: Path, make_manager: MakeManager) -> None:
    record = tmp_path / "lines.jsonl"
    manager = make_manager(
        {"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": {"record": str(record)}}})}
    )
    router = StreamRouter(manager, clock=ManualClock())
    target = DeliveryTarget("rec", "x", "user:5")

    report = await router.deliver(target, events_of([Token("hi")]), run_id="r1", session_label="s")

    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines == [
        {
            "type": "stream_start",
            "runId": "r1",
            "sessionLabel": "s",
            "target": {"channel": "rec", "account_id": "x", "to": "user:5"},
        },
        {"type": "token", "text": "hi"},
        {"type": "stream_end", "runId": "r1", "final": True},
    ]
    assert report.ok and report.message_ids == ["m2"]


async def test_a_source_that_raises_ends_the_delivery_with_stream_error_partial(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    record = tmp_path / "lines.jsonl"
    manager = make_manager(
        {"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": {"record": str(record)}}})}
    )
    router = StreamRouter(manager, clock=ManualClock())

    async def broken() -> AsyncIterator[StreamEvent]:
        yield Token("half a rep")
        raise RuntimeError("provider connection reset")

    report = await router.deliver(DeliveryTarget("rec", "x", "u"), broken(), run_id="r")

    last = json.loads(record.read_text().splitlines()[-1])
    assert last["type"] == "stream_error" and last["partial"] is True
    assert "provider connection reset" in last["error"]
    assert report.ok, "the adapter completed the delivery; the run's failure is in the stream"


async def test_reasoning_is_forwarded_when_the_adapter_asks(tmp_path: Path, make_manager: MakeManager) -> None:
    record = tmp_path / "lines.jsonl"
    manager = make_manager(
        {
            "rec": adapter(
                command=script_command("recorder.py"),
                reasoning=True,
                accounts={"x": {"config": {"record": str(record)}}},
            )
        }
    )
    router = StreamRouter(manager, clock=ManualClock())
    target = DeliveryTarget("rec", "x", "u")
    await router.deliver(target, events_of(reply("r", target)))
    kinds = [json.loads(line)["type"] for line in record.read_text().splitlines()]
    assert "reasoning" in kinds
