"""docs/engine.md's example runs as written: three sessions at once, one steered, one aborted."""

from __future__ import annotations

import asyncio
import gc
import re
import weakref
from pathlib import Path
from typing import Any

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.ledger import Ledger
from nexus.llm.abort import AbortSignal
from nexus.testing import ScriptedModel, by_session
from nexus.testing.steps import stall, text, tool_call

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def _example() -> str:
    source = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: three-sessions -->\n```python\n(.*?)```", source, re.S)
    assert found is not None, "docs/engine.md lost its three-sessions example"
    return found.group(1)


def _per_session_models() -> tuple[dict[str, ScriptedModel], Any]:
    models = {
        "alpha": ScriptedModel([tool_call("ls", {}, id="c1"), text("two files, and that is 2")]),
        "beta": ScriptedModel([stall(after_chunks=2, seconds=30, then=text("an essay that goes on and on"))]),
        "gamma": ScriptedModel([text("hi")]),
    }

    stream = by_session(models)

    return models, stream


async def test_three_sessions_with_steering_and_abort(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example's spec names no model: name one (its stream is the scripted one), or the default
    # would be the offline model, which a checkout without the [local] extra does not have
    monkeypatch.setenv("NEXUS_MODEL", "openai/gpt-4o-mini")
    namespace: dict[str, Any] = {}
    exec(compile(_example(), str(DOC), "exec"), namespace)
    models, stream = _per_session_models()
    runtime = Runtime(load_config(), ledger, stream_fn=stream)
    results = await namespace["three_sessions"](runtime)
    alpha, beta, gamma = results["alpha"], results["beta"], results["gamma"]
    assert alpha.stop_reason == "end_turn" and alpha.reply == "two files, and that is 2"
    assert "and count them" in [m.text for m in alpha.messages if m.role == "user"]
    assert beta.stop_reason == "aborted" and beta.turn_id is not None
    assert gamma.reply == "hi" and gamma.stop_reason == "end_turn"
    for label, result in results.items():
        head = await ledger.sessions.head(label)
        assert head is not None and head.id == result.turn_id
    assert runtime.live() == []
    models["alpha"].assert_complete()


async def test_a_finished_run_is_not_kept_by_the_runtime(ledger: Ledger) -> None:
    """Once its caller lets go, an ended run (its task, its result) is freed: the runtime's table of live
    runs dropped ended ones only at a later start, so 1,000 runs that ended together stayed in memory."""
    scripted = ScriptedModel([text("one"), text("two"), text("three")], record=False)
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream)
    spec = AgentSpec(model=scripted.model)
    tasks = []
    for label in ("a", "b", "c"):
        execution = runtime.start(spec, label, "hello")
        tasks.append(weakref.ref(execution.result))
        assert (await execution.result).stop_reason == "end_turn"
    del execution
    await asyncio.sleep(0)  # the loop's handle that resumed this test held the last task until the next step
    gc.collect()
    assert [task() for task in tasks] == [None, None, None]
    assert runtime.live() == []


async def test_many_runs_started_at_once_sweep_the_live_table_a_few_times(ledger: Ledger) -> None:
    """Past 64 live runs, every start swept the whole table for ended runs: quadratic in a burst (1,000 runs
    started at once swept it 936 times, ~470,000 look-ups). It is swept when it has doubled since."""
    scripted = ScriptedModel([stall(after_chunks=1, seconds=30) for _ in range(300)], record=False)
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream)
    spec = AgentSpec(model=scripted.model)
    signal = AbortSignal()
    sweeps = 0
    executions = []
    for n in range(300):
        table = runtime._live
        executions.append(runtime.start(spec, f"s{n}", "hello", signal=signal))
        sweeps += runtime._live is not table  # a sweep builds a new table
    assert len(runtime.live()) == 300
    assert sweeps <= 3, sweeps  # at 64, 128 and 256 live runs (it was 236)
    signal.abort("done")
    await asyncio.gather(*(execution.result for execution in executions))
    assert runtime.live() == []
