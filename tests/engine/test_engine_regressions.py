"""Regression tests for the two engine bugs of issue 9 (each failed before its fix)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from nexus.agent.steering import SteerReceipt
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm.types import AssistantMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import stream_error, text, tool_call


async def test_engine_written_turn_keeps_its_cost(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {}, id="c1"), text("done")])
    scripted.model = replace(scripted.model, input_price=3.0, output_price=15.0)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    result = await env.start(AgentSpec(model=scripted.model), "main", "list the files").result
    head = await ledger.sessions.head("main")
    assert head is not None
    stored = [m.message for m in await ledger.turns.messages(head.id) if isinstance(m.message, AssistantMessage)]
    per_message = sum(m.usage.cost.total for m in stored)
    assert per_message > 0
    assert abs(head.cost - per_message) < 1e-12
    assert abs(result.usage.cost.total - per_message) < 1e-12


async def test_steer_accepted_before_a_stream_failure_is_not_lost(ledger: Ledger) -> None:
    # the steer arrives while the model streams; the stream then fails after some text
    scripted = ScriptedModel([stream_error(after_chunks=3, status=400, of=text("some words and then it breaks"))])
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    holder: list[object] = []

    def on_text(delta: str) -> None:
        if not holder:
            holder.append(execution.steer("also mention the weather"))

    callbacks = EngineCallbacks(on_partial_reply=on_text)
    execution = env.start(AgentSpec(model=scripted.model), "main", "hi", callbacks=callbacks)
    result = await asyncio.wait_for(execution.result, 10)
    assert result.stop_reason == "error"
    receipt = holder[0]
    assert isinstance(receipt, SteerReceipt)
    # accepted while streaming, then handed back (never silently gone) and listed in the result
    assert receipt.status == "returned" and receipt.reason and "ended" in receipt.reason
    assert [r.message.content for r in result.returned_steers] == ["also mention the weather"]
    assert result.returned_steers[0] is receipt
