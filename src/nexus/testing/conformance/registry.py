"""The optional stores: the agent registry and the delivery log."""

from __future__ import annotations

import pytest

from nexus.ledger import AgentSessionTakenError, DeliveryRecord, Ledger, NewSession
from nexus.testing.conformance.support import need, qa_turn


async def test_agents_register_with_their_session_and_never_share_one(ledger: Ledger) -> None:
    need(ledger, "agents")
    row = await ledger.agents.save("w", role="worker", session_label="agent:w", spec={"model": "m"})
    assert (row.agent_id, row.role, row.session_label, row.spec) == ("w", "worker", "agent:w", {"model": "m"})
    assert (await ledger.sessions.get("agent:w")).label == "agent:w"  # created with the agent
    with pytest.raises(AgentSessionTakenError):
        await ledger.agents.save("other", role="worker", session_label="agent:w", spec={})
    updated = await ledger.agents.add("w", spec={"tools": ["read"]})  # keeps what it leaves out
    assert updated.role == "worker" and updated.spec == {"model": "m", "tools": ["read"]}
    assert [a.agent_id for a in await ledger.agents.list()] == ["w"]
    assert await ledger.agents.remove("w") and not await ledger.agents.remove("w")
    assert await ledger.agents.get("w") is None and await ledger.agents.list() == []
    await ledger.sessions.get("agent:w")  # the session and its history stay


async def test_deliveries_are_kept_per_turn_and_listed_newest_first(ledger: Ledger) -> None:
    need(ledger, "deliveries")
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    t2 = await qa_turn(ledger, "s", "q2", "a2")

    def record(turn: str, at: int, status: str = "delivered") -> DeliveryRecord:
        target = {"chat_id": 7}
        return DeliveryRecord(turn, "s", "telegram", "main", target, "blocks", status, at, at + 1, ["m1"])  # type: ignore[arg-type]

    first = await ledger.deliveries.record(record(t1, 10))
    second = await ledger.deliveries.record(record(t2, 20, "partial"))
    assert first.id and second.id and first.id != second.id
    found = await ledger.deliveries.for_turns([t1, t2, "01NONE"])
    assert [d.id for d in found[t1]] == [first.id] and [d.status for d in found[t2]] == ["partial"]
    assert found[t1][0].target == {"chat_id": 7} and found[t1][0].message_ids == ["m1"]
    assert [d.id for d in await ledger.deliveries.recent(session_label="s")] == [second.id, first.id]
    with pytest.raises(ValueError, match="delivery status"):
        await ledger.deliveries.record(record(t1, 30, "lost"))
