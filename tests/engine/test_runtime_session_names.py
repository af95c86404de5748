"""A run's session name: the Python API refuses a new one no door could name again, as the CLI, HTTP and MCP do.

A trial ran ``runtime.run(spec, "a\\nb", …)`` (and ``" lead"``, ``"a\\x00b"``): each made a session whose label
printed a forged row in ``nexus sessions list``. An existing session of such a name (an older version's) still runs.
"""

from __future__ import annotations

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession, SessionLabelError
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


async def test_a_new_session_name_no_door_could_name_again_is_refused(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("ran"), text("ran too")])
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    spec = AgentSpec(model=scripted.model)
    for name in ("a\nb", " lead", "trail ", "a\x00b", "x\x1b[31m"):
        with pytest.raises(SessionLabelError):
            await env.run(spec, name, "hi")
        with pytest.raises(SessionLabelError):
            env.start(spec, name, "hi")
    assert [s.label for s in await ledger.sessions.list()] == []  # nothing made
    await ledger.sessions.create(NewSession(" old"))  # made before the rule, by an older version
    assert (await env.run(spec, " old", "hi")).messages[-1].text == "ran"
    assert (await env.run(spec, "main/sub-task", "hi")).messages[-1].text == "ran too"  # a sub-agent's kind of label
