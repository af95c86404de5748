"""A broker with leases off tells the engine so, and its turn writes skip the lease fence's read.

The fence (``check_consumed_in``) reads every consumed item's claim beside its session's lease, so a run
that lost its lease writes nothing. Items claimed without a lease carry no epoch and are never taken over
while their broker lives, so for a broker with leases off (SQLite's default) the read found nothing, once
per turn. The claim now says whether it was leased (``lease_fence``); with leases on the fence runs as
before. Real SQLite ledger, real engine, the scripted model; the statements are the writer connection's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

FENCE_READ = "FROM queue_items q"
"""The fence's statement (``nexus.ledger._leases.leased_claims``): a claim beside its session's lease."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def _one_turn(ledger: Ledger, sql_trace: Callable[[Any], list[str]], *, leases: bool) -> list[str]:
    """One message through a broker (``leases`` on or off); the statements the writer connection ran."""
    scripted = ScriptedModel([text("done")])
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup"), leases=leases))
    await broker.start()
    await ledger.sessions.ensure(NewSession("agent:w"))
    broker.register_agent(AgentIdentity("w", "agent:w"), spec=AgentSpec(model=scripted.model.ref))
    statements = sql_trace(ledger)
    try:
        result = await broker.send_and_wait(AgentMessage("m-1", "user", "w", "go"), timeout_ms=20_000)
    finally:
        await broker.close()
    assert result.success and result.reply == "done"
    (item,) = BrokerStore(ledger.database).items(agent_id="w")
    assert (item.status, item.turn_id) == ("delivered", result.turn_id)
    return statements


async def test_a_broker_without_leases_writes_its_turn_without_the_fence_read(
    ledger: Ledger, sql_trace: Callable[[Any], list[str]]
) -> None:
    statements = await _one_turn(ledger, sql_trace, leases=False)
    assert any(s.startswith("INSERT INTO turns") for s in statements), "the writer connection was traced"
    assert not [s for s in statements if FENCE_READ in s]


async def test_a_broker_under_leases_still_fences_its_turn_write(
    ledger: Ledger, sql_trace: Callable[[Any], list[str]]
) -> None:
    statements = await _one_turn(ledger, sql_trace, leases=True)
    assert [s for s in statements if FENCE_READ in s]
