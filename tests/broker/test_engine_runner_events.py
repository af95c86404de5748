"""The run hooks watchers use: ``EngineRunner.on_run`` announces each run, ``EngineRunHandle.on_event`` streams it."""

from __future__ import annotations

from pathlib import Path

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker.engine_runner import EngineRunHandle, EngineRunner
from nexus.config import load_config
from nexus.engine import Runtime
from nexus.engine.execution.events import ExecutionEvent, ReplyDelta
from nexus.engine.execution.failover import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


async def test_a_watcher_sees_the_run_that_consumes_an_item_and_every_text_delta(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("one two three four"), text("unwatched")], chunk_chars=3)
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        runner = EngineRunner(env)
        broker = AgentBroker(BrokerStore(ledger.database), runner, BrokerSettings(queue=QueueSettings(mode="followup")))
        runner.attach(broker)
        await broker.start()
        ledger.ensure_session("agent:coder")
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec={"model": scripted.model.ref})
        runs: list[EngineRunHandle] = []
        deltas: list[str] = []

        def on_event(item: ExecutionEvent) -> None:  # the run's channel: text arrives as reply deltas
            if isinstance(item.event, ReplyDelta):
                deltas.append(item.event.delta)

        def on_run(handle: EngineRunHandle) -> None:
            runs.append(handle)
            handle.on_event(on_event)  # subscribed before the turn starts: nothing is missed

        remove = runner.on_run(on_run)
        result = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", "count"), timeout_ms=20_000)
        remove()
        await broker.send_and_wait(AgentMessage("m-2", "user", "coder", "again"), timeout_ms=20_000)
        await broker.close()
    assert result.success and len(runs) == 1  # the second run came after unsubscribing
    assert runs[0].request.agent_id == "coder" and len(runs[0].request.item_ids) == 1
    assert "".join(deltas) == "one two three four" and len(deltas) > 3
