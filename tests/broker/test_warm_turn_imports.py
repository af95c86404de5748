"""A broker turn of a warm process runs no import statement in nexus code.

An import statement of a module already loaded still costs ~1.3 us a call (CPython 3.11 probes the module
for ``__path__``, which raises and drops two AttributeErrors); four of them ran on every broker turn.
Modules a run may never need stay imported on first use, once.
"""

from __future__ import annotations

import asyncio
import builtins
import sys
from pathlib import Path
from typing import Any

import nexus
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

_SRC = str(Path(nexus.__file__).parent)


def test_a_warm_broker_turn_imports_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    seen: list[str] = []
    real_import = builtins.__import__

    def recording(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(_SRC):
            seen.append(f"{name} {tuple(fromlist or ())} in {caller[len(_SRC) :]}")
        return real_import(name, globals, locals, fromlist, level)

    async def two_turns() -> None:
        scripted = ScriptedModel([text("ok"), text("ok")], record=False)
        with Ledger.open(tmp_path / "agents.db") as ledger:
            runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
            broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup")))
            await broker.start()
            broker.register_agent(AgentIdentity("a", "agent:a"), spec=AgentSpec(model=scripted.model.ref))
            await broker.send(AgentMessage("m0", "user", "a", "first"))
            await broker.wait_until_idle()  # the first turn imports what it needs
            monkeypatch.setattr(builtins, "__import__", recording)
            await broker.send(AgentMessage("m1", "user", "a", "second"))
            await broker.wait_until_idle()
            monkeypatch.setattr(builtins, "__import__", real_import)
            await broker.close()
        scripted.assert_complete()  # both turns ran

    asyncio.run(two_turns())
    assert seen == []
