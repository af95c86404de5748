"""``Execution.events_shown``: a run's StreamEvents wait while its owner cannot vouch for it, and the ledger
decides what the held ones become (tests/broker/test_paused_run_events.py has the broker's lease case).

A real run on a real SQLite ledger and the scripted model; the gate is set as the broker sets it, right
after the run is started.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.adapters.types import DeliveryTarget
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.ledger import Ledger
from nexus.streaming import stream_events
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

REPLY = "one two three four five six seven eight nine ten"
TARGET = DeliveryTarget("web", "server", "main")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


class Gate:
    """Says False for its first ``closed`` looks, then True; counts the looks."""

    def __init__(self, closed: int) -> None:
        self.closed, self.looks = closed, 0

    def __call__(self) -> bool:
        self.looks += 1
        return self.looks > self.closed


async def _run(ledger: Ledger, gate: Gate) -> tuple[list[str], list[str]]:
    scripted = ScriptedModel([text(REPLY)], chunk_chars=4)
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream)
    execution = runtime.start(AgentSpec(model=scripted.model.ref), "main", "count to ten")
    execution.events_shown = gate
    events = [event async for event in stream_events(execution, TARGET)]
    await execution.result
    tokens = [getattr(event, "text", "") for event in events if event.type == "token"]
    return tokens, [event.type for event in events if event.type != "token"]


async def test_events_held_while_the_gate_is_closed_go_out_in_order_when_it_opens(ledger: Ledger) -> None:
    tokens, others = await _run(ledger, Gate(closed=5))
    assert "".join(tokens) == REPLY
    assert others == ["stream_start", "stream_end"]


async def test_events_held_until_the_end_go_out_when_the_turn_is_written(ledger: Ledger) -> None:
    gate = Gate(closed=10_000)
    tokens, others = await _run(ledger, gate)
    assert "".join(tokens) == REPLY  # the write succeeded: the owner's doubt did not cost the reader anything
    assert others == ["stream_start", "stream_end"] and gate.looks > 5
    (turn,) = await ledger.turns.path("main")
    assert turn.status == "completed"


async def test_a_run_nobody_gates_is_streamed_as_before(ledger: Ledger) -> None:
    scripted = ScriptedModel([text(REPLY)], chunk_chars=4)
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream)
    execution = runtime.start(AgentSpec(model=scripted.model.ref), "main", "count to ten")
    assert execution.events_shown is None
    events = [event async for event in stream_events(execution, TARGET)]
    assert "".join(getattr(e, "text", "") for e in events if e.type == "token") == REPLY
