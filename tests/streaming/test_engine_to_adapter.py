"""End to end: a scripted run through the engine → StreamEvents → the router → real adapter processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.adapters.manager import AdapterManager
from nexus.adapters.types import DeliveryTarget
from nexus.config import AdapterConfig, load_config
from nexus.engine import AgentResult, AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.streaming import stream_events
from nexus.streaming.router import DeliveryReport, StreamRouter
from nexus.testing import ManualClock, ScriptedModel
from nexus.testing.steps import http_error, reply, text, thinking, tool_call

EXAMPLE = Path(__file__).parents[2] / "examples" / "adapters" / "outbox_adapter.py"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.open(tmp_path / "agents.db")
    yield led
    led.close()


async def deliver_run(
    env: Runtime, router: StreamRouter, target: DeliveryTarget, message: str
) -> tuple[DeliveryReport, AgentResult]:
    owner = getattr(env.stream_fn, "__self__", None)
    assert isinstance(owner, ScriptedModel)
    model = owner.model
    execution = env.start(AgentSpec(model=model), "main", message)
    events = stream_events(execution, target)
    report = await router.deliver(target, events, run_id=execution.run_id, session_label=execution.session_label)
    result = await execution.result
    assert execution.context is not None and execution.run_id == execution.context.run_id
    return report, result


def env_for(ledger: Ledger, scripted: ScriptedModel) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())


async def test_a_tool_run_streams_natively_with_summaries_and_one_final_end(ledger: Ledger, tmp_path: Path) -> None:
    scripted = ScriptedModel(
        [
            reply(
                thinking("plan"),
                text("Writing it."),
                tool_call("write", {"path": "a.txt", "content": "hello\n"}, id="c1"),
            ),
            tool_call("read", {"path": "a.txt"}, id="c2"),
            text("The file says **hello**."),
        ]
    )
    out = tmp_path / "deliveries.jsonl"
    config = AdapterConfig.model_validate({"builtin": "jsonl", "accounts": {"a": {"config": {"path": str(out)}}}})
    manager = AdapterManager({"files": config}, state_dir=tmp_path / "state")
    try:
        report, result = await deliver_run(
            env_for(ledger, scripted),
            StreamRouter(manager, clock=ManualClock()),
            DeliveryTarget("files", "a", "chat:1"),
            "go",
        )
    finally:
        await manager.close()
    assert report.ok, report
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["text"] == "Writing it.The file says **hello**."
    assert record["tools"] == [
        ["write", "started", "Writing a.txt"],
        ["write", "completed", "Wrote a.txt (1 lines)"],
        ["read", "started", "Reading a.txt"],
        ["read", "completed", "Read a.txt"],
    ]
    assert record["events"][0] == "stream_start" and record["events"][-1] == "stream_end"
    assert record["events"].count("stream_end") == 3, "final:false after each tool-call model call, then final:true"
    assert record["run_id"] and record["session_label"] == "main"
    assert result.stop_reason == "end_turn"


async def test_a_failed_run_reaches_a_block_adapter_as_a_partial_error(ledger: Ledger, tmp_path: Path) -> None:
    scripted = ScriptedModel([http_error(400, "invalid request: bad things")])
    outbox = tmp_path / "out.jsonl"
    config = AdapterConfig.model_validate(
        {
            "command": f"{sys.executable} {EXAMPLE}",
            "blocks": {"human_delay_ms": [0, 0]},
            "accounts": {"me": {"config": {"outbox": str(outbox)}}},
        }
    )
    manager = AdapterManager({"outbox": config}, state_dir=tmp_path / "state")
    try:
        report, result = await deliver_run(
            env_for(ledger, scripted),
            StreamRouter(manager, clock=ManualClock()),
            DeliveryTarget("outbox", "me", "bob"),
            "go",
        )
    finally:
        await manager.close()
    assert report.path == "blocks" and not report.ok
    assert report.partial is False
    assert result.stop_reason == "error"
    assert not outbox.exists(), "nothing was sent: no text was produced"


async def test_block_delivery_replies_first_and_threads_all(ledger: Ledger, tmp_path: Path) -> None:
    long_text = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(6))
    scripted = ScriptedModel([text(long_text)])
    outbox = tmp_path / "out.jsonl"
    config = AdapterConfig.model_validate(
        {
            "command": f"{sys.executable} {EXAMPLE}",
            "blocks": {"human_delay_ms": [0, 0], "min_chars": 300, "max_chars": 600},
            "accounts": {"me": {"config": {"outbox": str(outbox)}}},
        }
    )
    manager = AdapterManager({"outbox": config}, state_dir=tmp_path / "state")
    target = DeliveryTarget("outbox", "me", "bob", thread_id="th1", reply_to_id="m0")
    try:
        report, _ = await deliver_run(
            env_for(ledger, scripted), StreamRouter(manager, clock=ManualClock()), target, "go"
        )
    finally:
        await manager.close()
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert report.ok and report.blocks_sent == len(sent) >= 6
    assert [s["reply_to"] for s in sent] == ["m0"] + [None] * (len(sent) - 1)
    assert {s["thread"] for s in sent} == {"th1"}
    assert all(len(s["text"]) <= 600 for s in sent)
    assert " ".join(s["text"] for s in sent).split() == long_text.split()
