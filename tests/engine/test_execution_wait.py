"""Waiting for a run to get past its starting phase (``wait_started``, ``wait_state_change``), and what a run
nobody waits on holds for it (a thousand runs in flight each had a future made for a waiter that never came)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


async def _runtime(ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tps: float) -> Runtime:
    monkeypatch.setenv("NEXUS_HOME", str(tmp_path))
    monkeypatch.setenv("NEXUS_MODEL", "openai/gpt-4o-mini")
    await ledger.sessions.ensure(NewSession("s"))
    model = ScriptedModel([text("one two three four five six")] * 2, tokens_per_second=tps, record=False)
    return Runtime(load_config(), ledger, stream_fn=model.stream, cooldowns=ProfileCooldowns())


async def test_waiters_wake_when_the_run_starts_and_a_started_run_answers_at_once(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await _runtime(ledger, tmp_path, monkeypatch, 1000)
    execution = runtime.start(AgentSpec(id="w"), "s", "hello")
    assert execution.state == "starting"
    first, second = await asyncio.gather(execution.wait_started(), execution.wait_started())
    assert first and second and execution.state != "starting"
    assert await execution.wait_started()  # past its start: at once
    await execution.result
    assert await execution.wait_started() and await execution.wait_state_change() == "done"


async def test_a_run_that_ends_before_it_starts_tells_its_waiters_so(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await _runtime(ledger, tmp_path, monkeypatch, 2)
    holder = runtime.start(AgentSpec(id="w"), "s", "hold the session")
    assert await holder.wait_started()
    queued = runtime.start(AgentSpec(id="w"), "s", "wait for it")  # waits for the session's lock
    waiting = asyncio.gather(queued.wait_started(), queued.wait_state_change())
    await asyncio.sleep(0.05)
    assert queued.state == "starting" and not waiting.done()
    queued.abort("not any more")
    assert await waiting == [False, "done"]
    assert not await queued.wait_started()  # ended: at once
    holder.abort("the test is over")
    await asyncio.gather(holder.result, queued.result, return_exceptions=True)


async def test_a_run_nobody_waits_on_holds_no_future_for_waiters(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await _runtime(ledger, tmp_path, monkeypatch, 2)
    execution = runtime.start(AgentSpec(id="w"), "s", "hello")
    futures = [held for held in gc.get_referents(execution) if isinstance(held, asyncio.Future)]
    assert futures == [execution.result]  # its task only
    assert await execution.wait_started()
    assert [held for held in gc.get_referents(execution) if isinstance(held, asyncio.Future)] == [execution.result]
    execution.abort("the test is over")
    await asyncio.gather(execution.result, return_exceptions=True)
