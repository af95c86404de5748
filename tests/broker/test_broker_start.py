"""``AgentBroker.start`` after messages were sent to a broker not yet started."""

from __future__ import annotations

from pathlib import Path

from fake_runner import FakeRunner

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore


async def test_a_message_sent_before_start_is_queued_once(tmp_path: Path) -> None:
    """``send`` before ``start`` queues the item in memory and stores its row; the reload at start
    read the row back and queued it a second time: a collect batch carried the message twice."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ledger.ensure_session("agent:a")
        runner = FakeRunner(BrokerStore(ledger.database), auto_finish=True)
        settings = BrokerSettings(queue=QueueSettings(mode="collect", debounce_ms=10))
        broker = AgentBroker(runner.store, runner, settings)
        broker.register_agent(AgentIdentity("a", "agent:a"))
        await broker.send(AgentMessage(id="m1", from_="user", to="a", content="hello"))
        assert broker.get_queue_depth("a") == 1
        await broker.start()
        assert broker.get_queue_depth("a") == 1
        assert await broker.wait_for_idle("a", timeout_ms=3000)
        assert [run.request.prompt for run in runner.runs] == ["hello"]
        await broker.close()
