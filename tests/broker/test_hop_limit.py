"""The hop limit bounds two agents that keep messaging each other, replies included.

Each agent's every turn asks the other again (``send_message_to_agent`` without waiting), so a turn on an ask
makes two messages: its own new ask and the automatic ``worker_result`` reply to the asker. When the reply
carried the ask's hop instead of one more, every hop level doubled: one user message made about
``2 ** max_hops`` turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.llm.types import Context, ToolResultMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import Step, from_context, last_user_text, text, tool_call


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


def _target(context: Context) -> str:
    """The agent a turn of ``pa`` or ``pb`` asks: the one that wrote to it; a user's message goes to ``pa``,
    which asks ``pb``."""
    return "pa" if "[Message from pa]" in last_user_text(context) else "pb"


def _ping_pong(context: Context) -> Step:
    if context.messages and isinstance(context.messages[-1], ToolResultMessage):
        return text("sent")
    return tool_call("send_message_to_agent", {"to": _target(context), "content": "your turn"})


async def _settle(broker: AgentBroker, store: BrokerStore) -> None:
    """Wait until no message is left to run: a turn of one agent queues work for the other (and its reply
    is queued after the turn), so both agents idle at once is not the end until the queue agrees."""
    for _ in range(200):
        for agent in ("pa", "pb"):
            assert await broker.wait_for_idle(agent, timeout_ms=60_000)
        if not store.items(statuses=("queued", "processing")):
            return
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("max_hops", [4, 8])
async def test_a_ping_pong_between_two_agents_stops_within_the_hop_limit(ledger: Ledger, max_hops: int) -> None:
    scripted = ScriptedModel([from_context(_ping_pong)] * 4000)
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup"), max_hops=max_hops))
    await broker.start()
    for agent_id in ("pa", "pb"):
        await ledger.sessions.ensure(NewSession(f"agent:{agent_id}"))
        broker.register_agent(
            AgentIdentity(agent_id, f"agent:{agent_id}", "manager"), spec=AgentSpec(model=scripted.model.ref)
        )
    await broker.send(AgentMessage("m-1", "user", "pa", "start ping pong"), "followup")
    store = BrokerStore(ledger.database)
    await _settle(broker, store)
    items = store.items()
    assert all(item.status == "delivered" for item in items)
    hops = [item.message["metadata"]["hop"] for item in items if item.sender in ("pa", "pb")]
    asks = [item for item in items if item.sender in ("pa", "pb") and not item.message_id.endswith(":reply")]
    # each ask one hop past the conversation's highest (a reply carries the highest): asks stop at max_hops,
    # each ask gets one reply
    ask_hops = sorted(item.message["metadata"]["hop"] for item in asks)
    assert ask_hops == list(range(1, len(asks) + 1)) and len(asks) == max_hops, ask_hops
    assert len(hops) <= 2 * max_hops and max(hops) == max_hops, f"{len(hops)} messages between the agents"
    await broker.close()
