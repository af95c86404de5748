"""A sender follows the run that takes its message: ``SendReceipt.follow`` hands over the run and its events."""

from __future__ import annotations

from pathlib import Path

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.events import ReplyDelta
from nexus.ledger import Ledger, NewSession
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


async def test_a_sender_sees_the_run_that_consumes_its_message_and_every_text_delta(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("one two three four"), text("unwatched")], chunk_chars=3)
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        broker = AgentBroker(ledger, env, BrokerSettings(queue=QueueSettings(mode="followup")))
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:coder"))
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec=AgentSpec(model=scripted.model.ref))
        receipt = await broker.send(AgentMessage("m-1", "user", "coder", "count"))
        followed = await receipt.follow()  # handed over before the run does anything: nothing is missed
        assert followed is not None
        execution, events = followed
        deltas = [item.event.delta async for item in events if isinstance(item.event, ReplyDelta)]
        result = await receipt.outcome()
        await broker.send_and_wait(AgentMessage("m-2", "user", "coder", "again"), timeout_ms=20_000)
        await broker.close()
    assert result.success and result.turn_id == execution.turn_id
    assert execution.agent_id == "coder" and execution.session_label == "agent:coder"
    assert "".join(deltas) == "one two three four" and len(deltas) > 3
