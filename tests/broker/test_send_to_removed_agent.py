"""A message sent to an agent another door removed meanwhile is refused, naming the agent; nothing is stored.

``nexus agents rm`` (or ``DELETE /v1/agents/{id}``) writes the registry directly; a broker that registered the
agent earlier still has it in memory. Its ``send`` accepted the message into the removed agent's queue, where
nobody could list, clear or run it by the agent's id. The accept now reads the agent's status in its own
transaction (``nexus.ledger._queue_rows``). Real SQLite ledger; the runtime is the test's fake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runtime import open_broker

from nexus.broker import AgentIdentity, AgentMessage, UnknownAgentError
from nexus.ledger import Ledger


async def test_a_send_to_an_agent_removed_by_another_door_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker, _ = await open_broker(ledger)
        broker.register_agent(AgentIdentity("gone", "agent:gone"))
        assert await ledger.agents.remove("gone")  # the registry's row, written by another door
        with pytest.raises(UnknownAgentError, match="agent 'gone' was removed"):
            await broker.send(AgentMessage(id="late", from_="user", to="gone", content="hello?"))
        assert await ledger.queue.pending("gone") == []
        await broker.close()
