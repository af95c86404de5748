"""A run nobody listens to builds none of its own state/start/end events; a listener still gets them all.

A broker's runs usually have no listener: the channel only counts what it would have published. The
run's ``state``, ``run_start`` and ``run_end`` events (frozen dataclasses, ~1 us each) were built anyway,
five a turn, and dropped by ``publish``.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution import _run
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.events import RunEndEvent, RunStartEvent, StateEvent
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run's own events constructed, by type name (the classes the run module uses are swapped for counters)."""
    made: list[str] = []
    for kind in (StateEvent, RunStartEvent, RunEndEvent):

        def counting(*args: Any, _kind: Any = kind) -> Any:
            made.append(_kind.__name__)
            return _kind(*args)

        monkeypatch.setattr(_run, kind.__name__, counting)
    return made


def _env(ledger: Ledger, scripted: ScriptedModel) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())


async def test_an_unwatched_run_builds_no_state_or_run_events(ledger: Ledger, built: list[str]) -> None:
    scripted = ScriptedModel([text("ok")])
    execution = _env(ledger, scripted).start(AgentSpec(model=scripted.model), "main", "hi")
    result = await execution.result
    assert result.error is None and execution.state == "done"
    assert built == []


async def test_a_listener_gets_every_event_numbered_without_gaps(ledger: Ledger, built: list[str]) -> None:
    scripted = ScriptedModel([text("ok")])
    execution = _env(ledger, scripted).start(AgentSpec(model=scripted.model), "main", "hi")
    seen: list[Any] = []
    execution.on_event(seen.append)
    await execution.result
    types = [item.type for item in seen]
    assert types[0] == "run_start" and types[-2:] == ["run_end", "state"]
    assert types.count("state") == 3  # -> streaming, -> finishing, -> done
    assert [item.seq for item in seen] == list(range(seen[0].seq, seen[0].seq + len(seen)))
    assert sorted(set(built)) == ["RunEndEvent", "RunStartEvent", "StateEvent"]
