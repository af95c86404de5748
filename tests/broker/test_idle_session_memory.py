"""A broker turn, once ended, is freed at once: the idle session keeps no run, and nothing waits for the collector.

The session's queue remembered the item it last put in (``restored``, read right after an adoption) after the
item had left; the item holds its ticket, the ticket its execution, and the execution its whole ended run
(history, messages, tools, window): one run's state for every idle session. And a run was a reference cycle, so
with the collector tuned for many runs each turn's state waited for a collection (see
``tests/engine/test_run_freed_by_refcount.py``).
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Execution, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


def _live_executions() -> int:
    gc.collect()
    return sum(isinstance(o, Execution) for o in gc.get_objects())


def _cycles() -> list[str]:
    """The type names of the nexus objects only the collector could free."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(0)
    found = {type(o).__module__ + "." + type(o).__qualname__ for o in gc.garbage}
    gc.garbage.clear()
    return sorted(name for name in found if name.startswith("nexus."))


def test_idle_sessions_hold_no_ended_run_and_turns_make_no_cycle(tmp_path: Path) -> None:
    async def turns() -> tuple[int, int, list[str]]:
        scripted = ScriptedModel([text("ok") for _ in range(6)], record=False)
        with Ledger.open(tmp_path / "agents.db") as ledger:
            runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
            broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup")))
            await broker.start()
            for name in ("a", "b"):
                broker.register_agent(AgentIdentity(name, f"agent:{name}"), spec=AgentSpec(model=scripted.model.ref))
            before = _live_executions()
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                for n in range(6):
                    await broker.send(AgentMessage(f"m{n}", "user", "ab"[n % 2], f"task {n}"))  # the ticket is dropped
                await broker.wait_until_idle()
                await asyncio.sleep(0)
                cycles = _cycles()
            finally:
                if was_enabled:
                    gc.enable()
            idle = _live_executions()
            await broker.close()
        scripted.assert_complete()
        return before, idle, cycles

    before, idle, cycles = asyncio.run(turns())
    assert idle == before  # two idle sessions, six ended turns: no execution kept
    assert cycles == []
