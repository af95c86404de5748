"""A run that fails at its start still ends with one ``run_end`` stating why, and its caller still gets the error.

The engine's run opens its turn (the crash journal) before the model is called. When that open raised (a ledger
error, or ``LeaseLostError`` from the lease fence: the session was taken over meanwhile), only a cancellation was
handled: the run's task ended with the error but its event channel never announced an end nor closed, so a
listener (the broker's deliverer, an SSE client, ``nexus send --wait``) waited forever, and a steer offered to the
starting run was never handed back. A failure before the run is attached (its context could not be assembled)
closed the channel with no ``run_end``. Real SQLite ledger (with its lease store), real engine, scripted model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nexus.adapters import DeliveryTarget
from nexus.config import load_config
from nexus.engine import AgentSpec, Execution, ExecutionEvent, Runtime, Subscription
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.errors import ConfigError
from nexus.ledger import AcceptRequest, Lease, LeaseLostError, Ledger, NewSession
from nexus.streaming import StreamError, StreamEvent, stream_events
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

SHORT_MS = 300
"""The time to live the lease is cut to once the run's claim is made: the run loses it before its turn opens."""

LONG_MS = 60_000
"""The lease's time to live until then: acquired with :data:`SHORT_MS`, it could run out before the claim made
under it (a loaded machine), and the claim failed instead of the run."""


async def _expired(ledger: Ledger, lease: Lease) -> None:
    """Cut ``lease`` short (renewed for :data:`SHORT_MS`), then wait until the database's clock has passed it."""
    await ledger.leases.renew(lease, SHORT_MS)
    for _ in range(200):
        if any(found.session_label == lease.session_label for found in await ledger.leases.expired()):
            return
        await asyncio.sleep(SHORT_MS / 4000)
    raise AssertionError("the lease never expired")


def _everything(execution: Execution) -> asyncio.Future[list[ExecutionEvent]]:
    """Every event of the run until its channel closes (subscribed now; a channel that never closes fails)."""
    return asyncio.ensure_future(asyncio.wait_for(_drain(execution.subscribe()), 10))


async def _drain(subscription: Subscription) -> list[ExecutionEvent]:
    return [item async for item in subscription]


def _shown(execution: Execution) -> asyncio.Future[list[StreamEvent]]:
    """The run's StreamEvents as a deliverer sees them (subscribed now)."""
    events = stream_events(execution, DeliveryTarget("cli", "local", "stdout"))
    return asyncio.ensure_future(asyncio.wait_for(_listed(events), 10))


async def _listed(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def test_a_run_whose_turn_open_is_refused_ends_with_one_run_end_and_raises(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("never sent")])
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    await ledger.sessions.ensure(NewSession("agent:w"))
    item, _ = await ledger.queue.accept(AcceptRequest("w", "agent:w", "m-1", "cli", {"content": "go"}, "followup"))
    old = await ledger.leases.acquire("agent:w", "a", LONG_MS)
    assert old is not None
    await ledger.queue.claim([item.id], lease=old)
    await _expired(ledger, old)
    assert await ledger.leases.acquire("agent:w", "b", 60_000) is not None  # taken over: this run's open is refused

    stale = await runtime.begin(AgentSpec(model=scripted.model.ref), "agent:w", "go", consumes=[item.id])
    events, stream = _everything(stale), _shown(stale)
    receipt = stale.steer("and this too")  # offered while the run starts: it must be handed back
    with pytest.raises(LeaseLostError):  # the caller (the broker) still gets the error itself
        await stale.result
    items = await events
    ends = [item for item in items if item.type == "run_end"]
    assert len(ends) == 1, [item.type for item in items]
    result = ends[0].event.result
    assert result.status == "failed" and result.turn_id is None
    assert result.error is not None and "LeaseLostError" in result.error.message
    assert "run_start" not in [item.type for item in items]  # it never began
    assert stale.state == "done"
    assert receipt.status == "returned" and [r.id for r in result.returned_steers] == [receipt.id]
    shown = await stream
    assert isinstance(shown[-1], StreamError) and "LeaseLostError" in shown[-1].error
    assert scripted.calls == []  # nothing was asked of the model


async def test_a_run_whose_context_cannot_be_assembled_ends_with_one_run_end(ledger: Ledger, tmp_path: Path) -> None:
    not_a_directory = tmp_path / "workspace"
    not_a_directory.write_text("a file where the workspace should be")
    config = load_config().model_copy(update={"workspace": str(not_a_directory)})
    scripted = ScriptedModel([text("never sent")])
    runtime = Runtime(config, ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())

    execution = await runtime.begin(AgentSpec(model=scripted.model.ref), "main", "hi")
    events = _everything(execution)
    with pytest.raises(ConfigError):
        await execution.result
    items = await events
    ends = [item for item in items if item.type == "run_end"]
    assert len(ends) == 1, [item.type for item in items]
    result = ends[0].event.result
    assert result.status == "failed" and result.error is not None and "not a directory" in result.error.message
    assert execution.state == "done"
