"""A wrong argument to ``Runtime.start``/``begin``/``run`` is a ``TypeError`` naming it, before anything is written.

A trial ran ``runtime.run(spec, s, "look", images=["notanimage"])``: the session ``s`` was made, then the run's task
failed with ``AttributeError: 'str' object has no attribute 'id'``; ``runtime.run(spec, s, None)`` ran a turn.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus.config import load_config
from nexus.engine import AgentSpec, EngineCallbacks, EventContext, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm import AbortSignal, ImageContent
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

_BAD_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("images", {"images": ["notanimage"]}),
    ("images", {"images": [None]}),
    ("images", {"images": "x"}),
    ("images", {"images": 5}),
    ("consumes", {"consumes": "item-1"}),  # a string is a sequence: it was taken as six one-letter ids
    ("consumes", {"consumes": [5]}),
    ("tools", {"tools": ["bash"]}),
    ("source", {"source": 5}),
    ("event", {"event": "x"}),
    ("signal", {"signal": "x"}),
    ("callbacks", {"callbacks": "x"}),
    ("lease_fence", {"lease_fence": "no"}),
]


def _runtime(ledger: Ledger, steps: int) -> tuple[Runtime, AgentSpec]:
    scripted = ScriptedModel([text("ran")] * steps)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    return env, AgentSpec(model=scripted.model)


@pytest.mark.parametrize(("name", "options"), _BAD_OPTIONS)
async def test_a_wrong_option_is_a_type_error_naming_it_before_the_session_is_made(
    ledger: Ledger, name: str, options: dict[str, Any]
) -> None:
    env, spec = _runtime(ledger, 1)
    with pytest.raises(TypeError, match=f"^{name} must be"):
        await env.run(spec, "s1", "look", **options)
    with pytest.raises(TypeError, match=f"^{name} must be"):
        env.start(spec, "s2", "look", **options)
    assert await ledger.sessions.list() == []
    await env.aclose()


async def test_a_wrong_spec_session_or_message_is_a_type_error_naming_it(ledger: Ledger) -> None:
    env, spec = _runtime(ledger, 1)
    for args, name in [((None, "s", "hi"), "spec"), ((spec, None, "hi"), "session"), ((spec, 5, "hi"), "session"),
                       ((spec, "s", None), "message"), ((spec, "s", 5), "message")]:  # fmt: skip
        with pytest.raises(TypeError, match=f"^{name} must be"):
            await env.run(*args)
    assert await ledger.sessions.list() == []
    await env.aclose()


async def test_options_of_the_right_kinds_run(ledger: Ledger) -> None:
    env, spec = _runtime(ledger, 1)
    result = await env.run(
        spec, "s", "look", images=(ImageContent("aGk=", "image/png"),), consumes=[], tools=[], source="me",
        event=EventContext(), signal=AbortSignal(), callbacks=EngineCallbacks(), lease_fence=False,
    )  # fmt: skip
    assert result.messages[-1].text == "ran"
    assert [s.label for s in await ledger.sessions.list()] == ["s"]
    await env.aclose()
