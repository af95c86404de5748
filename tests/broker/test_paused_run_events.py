"""A run whose process was paused past its session's lease shows nothing it streamed after the pause, unless
the lease turns out to have held.

Brokers sharing a database hold each session under a lease renewed every third of its time to live. A
process paused longer than that (SIGSTOP, a frozen VM) may have been taken over meanwhile: the new holder
runs the message again and streams it. The paused run wakes up with its provider's bytes buffered and
streams them before its first renewal learns the lease is gone; its turn write is refused, but its tokens
went out to the session's readers (the server's event log, an adapter) in the middle of the new run's
reply. Now they are held while the lease is past its expiry: dropped when the write is refused, shown
when a renewal (or the turn's write) says the lease held (tests/streaming/test_events_shown.py).

A real SQLite ledger with leases on, the real engine and broker; the pause is the event loop blocked (what
SIGSTOP is to the process): in ``time.sleep`` for the run paused within its lease, and until the other
process's takeover (a second ledger on the file taking the expired lease from a thread) for the run taken
over, however late a loaded machine lets that thread run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from nexus.adapters.types import DeliveryTarget
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.ledger import LeaseLostError, Ledger, NewSession
from nexus.streaming import StreamEvent, stream_events
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

TTL_MS = 1500
"""The lease of the run taken over: renewed every 500 ms until the pause, so a loaded machine's stalls before it
do not let it lapse early (the run would end before streaming anything)."""
TAKEOVER_WAIT_S = 60
"""How long the pause may last at most: it ends once the other process took the lease (past ``TTL_MS``)."""
HELD_TTL_MS = 4500
"""The lease of the run paused within it: long, so a loaded machine's slow start and late renewals cannot
use up what the pause leaves (at 600 ms the lease expired before the pause ended, at load 15-20)."""
SHORT_PAUSE_S = HELD_TTL_MS / 1000 * 0.4
"""Longer than a renewal period (a third of the lease): a renewal falls due during the pause; shorter than the
two thirds of the lease left at worst when it starts."""
BEFORE = 2
"""Text chunks streamed before the pause."""
REPLY = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
LABEL = "agent:coder"


def _taken_over(path: Path, taken: threading.Event) -> None:
    """Another process's broker takes the session's lease once it expired (its own connection to the file),
    then sets ``taken``."""

    async def take() -> None:
        deadline = time.monotonic() + TAKEOVER_WAIT_S
        with Ledger.open(path) as other:
            while time.monotonic() < deadline:
                if await other.leases.acquire(LABEL, "another process", 60_000) is not None:
                    taken.set()
                    return
                await asyncio.sleep(0.02)

    time.sleep(TTL_MS / 1000 + 0.1)
    asyncio.run(take())


def _pausing(scripted: ScriptedModel, pause: Callable[[], object], meanwhile: Callable[[], None] | None) -> Any:
    """The scripted stream; after ``BEFORE`` chunks the whole process stops until ``pause`` returns (no timer,
    no renewal runs), while ``meanwhile`` runs on a thread (as another process would)."""

    async def stream(model: Any, context: Any, options: Any = None) -> AsyncIterator[Any]:
        chunks = 0
        async for event in scripted.stream(model, context, options):
            yield event
            if event.type == "text_delta":
                chunks += 1
                if chunks < BEFORE:
                    await asyncio.sleep(0.05)
                elif chunks == BEFORE:
                    await asyncio.sleep(0.05)  # the chunks so far reach the reader before the pause
                    if meanwhile is not None:
                        threading.Thread(target=meanwhile, daemon=True).start()
                    pause()  # the pause is the point: the loop stops as SIGSTOP stops it

    return stream


async def _run_once(path: Path, taken_over: bool) -> tuple[list[StreamEvent], Any, Ledger]:
    ledger = Ledger.open(path)
    await ledger.sessions.ensure(NewSession(LABEL))
    scripted = ScriptedModel([text(REPLY)], chunk_chars=6)
    taken = threading.Event()
    stream = (
        _pausing(scripted, lambda: taken.wait(TAKEOVER_WAIT_S), lambda: _taken_over(path, taken))
        if taken_over
        else _pausing(scripted, lambda: time.sleep(SHORT_PAUSE_S), None)
    )
    runtime = Runtime(load_config(), ledger, stream_fn=stream)
    ttl_ms = TTL_MS if taken_over else HELD_TTL_MS
    settings = BrokerSettings(queue=QueueSettings(mode="followup"), leases=True, lease_ttl_ms=ttl_ms)
    broker = AgentBroker(ledger, runtime, settings)
    await broker.start()
    broker.register_agent(AgentIdentity("coder", LABEL, "worker"), spec=AgentSpec(model=scripted.model.ref))
    receipt = await broker.send(AgentMessage("m-1", "user", "coder", "stream a reply"), "followup")
    followed = await receipt.follow()
    assert followed is not None
    execution, subscription = followed
    target = DeliveryTarget("web", "server", LABEL)
    events = [event async for event in stream_events(execution, target, subscription)]
    outcome = await asyncio.wait_for(asyncio.gather(execution.result, return_exceptions=True), 10)
    await broker.close()
    assert taken.is_set() == taken_over, "the paused process's lease was never taken over"
    return events, outcome[0], ledger


def _tokens(events: list[StreamEvent]) -> str:
    return "".join(getattr(event, "text", "") for event in events if event.type == "token")


async def test_a_run_taken_over_while_paused_shows_nothing_it_streamed_after_the_pause(tmp_path: Path) -> None:
    events, outcome, ledger = await _run_once(tmp_path / "agents.db", taken_over=True)
    with ledger:
        assert isinstance(outcome, LeaseLostError), outcome  # its turn write was refused
        assert await ledger.turns.path(LABEL) == []
    shown = _tokens(events)
    assert shown and REPLY.startswith(shown)  # what streamed before the pause went out
    assert len(shown) <= BEFORE * 6, f"tokens streamed after the takeover reached the reader: {shown!r}"
    assert events[0].type == "stream_start" and events[-1].type == "stream_error"  # the reader's stream ends


async def test_a_run_paused_within_its_lease_shows_its_whole_reply(tmp_path: Path) -> None:
    events, outcome, ledger = await _run_once(tmp_path / "agents.db", taken_over=False)
    with ledger:
        assert not isinstance(outcome, BaseException), outcome
        (turn,) = await ledger.turns.path(LABEL)
        assert turn.status == "completed"
    assert _tokens(events) == REPLY  # the lease held throughout: nothing held back
    assert [e.type for e in events if e.type != "token"] == ["stream_start", "stream_end"]


@pytest.fixture(autouse=True)
def _quiet_takeover_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", logger="nexus.broker")
