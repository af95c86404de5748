"""An ended run is freed by reference counting, not left to the garbage collector.

A run's parts called back into it (the context window's compaction events, the failover's events and
budget, the steering receipts), so every run was a reference cycle: with the collector tuned for many
runs (``tune_gc_for_many_runs``) ~50 objects a turn waited for a collection, and a run still in flight
when a young collection came was promoted with its whole state, to be freed only by a rare old one.
The run now drops those callbacks at its end. Each case runs with the collector off and then asks it
for the unreachable cycles (``DEBUG_SAVEALL`` keeps them to look at): none may be engine state.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm.abort import AbortSignal
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


@pytest.fixture
def collector_off() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def _cycles() -> list[str]:
    """The type names of the engine and agent objects only the collector could free."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    gc.set_debug(0)
    found = [type(o).__module__ + "." + type(o).__qualname__ for o in gc.garbage]
    gc.garbage.clear()
    return sorted({name for name in found if name.startswith(("nexus.engine", "nexus.agent"))})


def _env(ledger: Ledger, scripted: ScriptedModel, **kw: Any) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns(), **kw)


async def test_a_finished_run_is_no_cycle(ledger: Ledger, collector_off: None) -> None:
    scripted = ScriptedModel([text("one"), text("two")])
    env = _env(ledger, scripted)
    for prompt in ("first", "second"):
        execution = env.start(AgentSpec(model=scripted.model), "main", prompt)
        result = await execution.result
        assert result.error is None and execution.state == "done"
        late = execution.steer("after the end")  # the queue outlives the run: still handed back at once
        assert late.status == "returned"
    del execution, result
    assert _cycles() == []


async def test_a_run_that_took_a_steer_is_no_cycle(ledger: Ledger, collector_off: None) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        started.set()
        await release.wait()
        return AgentToolResult.text("slow done")

    tool = AgentTool("slow", "a slow tool", {"type": "object", "properties": {}}, slow)
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("after")])
    env = _env(ledger, scripted, tools=[tool])
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    seen: list[str] = []
    execution.on_event(lambda event: seen.append(event.type))
    await asyncio.wait_for(started.wait(), 5)
    receipt = execution.steer("and this")
    release.set()
    result = await execution.result
    assert receipt.status == "delivered" and result.error is None and "steer" in seen
    del execution, result, receipt
    assert _cycles() == []


async def test_a_cancelled_run_is_no_cycle(ledger: Ledger, collector_off: None) -> None:
    started = asyncio.Event()

    async def hang(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    tool = AgentTool("hang", "never returns", {"type": "object", "properties": {}}, hang)
    scripted = ScriptedModel([tool_call("hang", {}, id="h1")])
    env = _env(ledger, scripted, tools=[tool])
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    await asyncio.wait_for(started.wait(), 5)
    execution.abort("stop")
    result = await execution.result
    assert result.stop_reason == "aborted"
    del execution, result
    assert _cycles() == []
