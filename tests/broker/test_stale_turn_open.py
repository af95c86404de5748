"""A run that lost its session's lease before its turn opened leaves no turn (the fault test's "off the chain").

The engine opens a run's turn (status ``streaming``, the crash journal) when the run starts, after the
broker's claim. Under load the claim can commit at epoch N and the open only later, once the lease
expired and another broker took the session over: that broker's recovery (``recover(force=True)``) ran
before the open and closed nothing. The open was not fenced, so the stale run's turn was stored; its final
write was refused (``LeaseLostError``), the new holder moved the head on, and the next takeover's recovery
closed the stale turn as a side branch: a closed turn off the session's chain, which
``tests/broker/test_serve_faults.py`` reported at load 13-19. The open is fenced now like the turn's final
write: refused, nothing stored. Real SQLite ledger with the lease store, real engine, the scripted model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import AcceptRequest, Lease, LeaseLostError, Ledger, NewSession
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

SHORT_MS = 300
"""The time to live the stale run's lease is cut to once its claim is made (it is let run out)."""

LONG_MS = 60_000
"""The time to live of a lease while the test's steps need it held, however slow the machine: acquired with
:data:`SHORT_MS`, it could run out before the claim made under it (a loaded machine), which then failed."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def _expired(ledger: Ledger, lease: Lease) -> None:
    """Cut ``lease`` short (renewed for :data:`SHORT_MS`), then wait until the database's clock has passed it."""
    await ledger.leases.renew(lease, SHORT_MS)
    for _ in range(200):
        if any(found.session_label == lease.session_label for found in await ledger.leases.expired()):
            return
        await asyncio.sleep(SHORT_MS / 4000)
    raise AssertionError("the lease never expired")


async def _turn_ids(ledger: Ledger, session: str) -> list[str]:
    rows = await ledger.database.run_read(
        lambda c: c.execute("SELECT id FROM turns WHERE session_label = ? ORDER BY id", (session,)).fetchall()
    )
    return [str(row[0]) for row in rows]


async def test_a_run_whose_lease_was_taken_over_before_its_turn_opened_stores_no_turn(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("late"), text("fresh")])
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    spec = AgentSpec(model=scripted.model.ref)
    await ledger.sessions.ensure(NewSession("agent:w"))
    item, _ = await ledger.queue.accept(AcceptRequest("w", "agent:w", "m-1", "cli", {"content": "go"}, "followup"))
    old = await ledger.leases.acquire("agent:w", "a", LONG_MS)
    assert old is not None
    await ledger.queue.claim([item.id], lease=old)  # the stale run's claim, at its epoch
    await _expired(ledger, old)
    new = await ledger.leases.acquire("agent:w", "b", 60_000)  # another broker takes the session over
    assert new is not None and new.prior_holder == "a"
    assert await ledger.turns.recover(force=True, session="agent:w") == []  # the takeover's recovery: nothing open

    stale = await runtime.begin(spec, "agent:w", "go", consumes=[item.id], lease_fence=True)  # it starts only now
    with pytest.raises(LeaseLostError):
        await stale.result
    assert await _turn_ids(ledger, "agent:w") == []  # nothing stored: no turn for a later recovery to fork off

    await ledger.queue.claim([item.id], lease=new)  # the new holder runs the message
    fresh = await runtime.begin(spec, "agent:w", "go", consumes=[item.id], lease_fence=True)
    result = await fresh.result
    assert result.status == "completed" and result.turn_id is not None
    assert await ledger.turns.recover(force=True, session="agent:w") == []  # a later takeover: nothing to close
    assert await _turn_ids(ledger, "agent:w") == [result.turn_id]
    head = await ledger.sessions.head("agent:w")
    assert head is not None and head.id == result.turn_id
