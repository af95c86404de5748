"""Broker runs of ``nexus serve`` appear live on their session's event stream, as seed-004 StreamEvents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.server._event_hub import EventHub
from nexus.server._live import LiveRuns
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


def _data(frame: bytes) -> dict[str, object]:
    """The JSON of an SSE frame's ``data:`` line."""
    (line,) = [line for line in frame.decode().splitlines() if line.startswith("data:")]
    data: dict[str, object] = json.loads(line.removeprefix("data:").strip())
    return data


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def test_a_runs_tokens_and_tool_status_reach_the_sessions_stream(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {"path": "."}), text("Two files.")])
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, env, BrokerSettings(queue=QueueSettings(mode="followup")))
    env.spawner = BrokerSpawner(broker)
    hub = EventHub()
    env.on_start = LiveRuns(hub).follow
    await broker.start()
    broker.register_agent(AgentIdentity("coder", "agent:coder"), spec=AgentSpec(model=scripted.model.ref))
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", "what is here?"), timeout_ms=20_000)
    assert result.success
    events = [_data(e.frame) for e in hub.retained("agent:coder")]
    types = [e["type"] for e in events]
    assert types[0] == "stream_start" and types[-1] == "stream_end"
    assert events[0]["sessionLabel"] == "agent:coder" and events[-1]["final"] is True
    assert [e["status"] for e in events if e["type"] == "tool_status"] == ["started", "completed"]
    assert {"type": "stream_end", "runId": events[0]["runId"], "final": False} in events
    assert "".join(e["text"] for e in events if e["type"] == "token") == "Two files."
    hub.close()
    await broker.close()
