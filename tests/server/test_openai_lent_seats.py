"""A chat completion whose run asks another agent and waits finishes with ``max_concurrent = 1``.

The broker lends a run's seat while it waits on another agent (docs/broker.md); the batches of the agents'
queues were tested that way, not a completion over ``/v1/chat/completions``: in the agent's own session it is a
queued batch, in another session (``X-Nexus-Session``) a run the broker starts beside its queues. Every wait is
bounded, so a deadlock fails the test in seconds instead of hanging it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nexus.llm import Context
from nexus.testing import ScriptedModel
from nexus.testing.steps import Step, from_context, last_user_text, text, tool_call

from .broker_app import live_app

BOUND_S = 20.0
"""Far above what the turns take, far below the asking tool's 600 s timeout."""


def lead_asks_coder(context: Context) -> Step:
    """``lead`` asks ``coder`` and waits for the reply; ``coder`` answers; ``lead`` answers with the reply."""
    asked = last_user_text(context)
    if asked.endswith("ask coder"):
        return tool_call("send_message_to_agent", {"to": "coder", "content": "2+2?", "waitForReply": True})
    if "[Message from lead]" in asked:
        return text("four")
    return text(f"coder said: {asked.rsplit(chr(10), 1)[-1]}")


@pytest.mark.parametrize("session", [None, "proj-x"], ids=["own-session", "other-session"])
async def test_a_completion_that_asks_another_agent_and_waits_finishes_with_one_seat(
    tmp_path: Path, session: str | None
) -> None:
    scripted = ScriptedModel([from_context(lead_asks_coder)] * 8, record=False)
    async with live_app(tmp_path, scripted, max_concurrent=1) as live, live.client() as http:
        headers = {"X-Nexus-Session": session} if session else {}
        body = {"model": "lead", "messages": [{"role": "user", "content": "ask coder"}]}
        answer = await asyncio.wait_for(http.post("/v1/chat/completions", json=body, headers=headers), BOUND_S)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "coder said: four"
        assert answer.headers["x-nexus-session"] == (session or "agent:lead")


def lead_spawns_a_worker(context: Context) -> Step:
    """``lead`` spawns a worker and waits for it; the worker answers; ``lead`` answers with the worker's reply."""
    asked = last_user_text(context)
    if asked.endswith("spawn a worker"):
        return tool_call("spawn_agent", {"task": "2+2?", "label": "adder"})
    if asked.endswith("2+2?"):
        return text("four")
    return text(f"the worker said: {asked.rsplit(chr(10), 1)[-1]}")


async def test_a_completion_in_another_session_that_spawns_and_waits_finishes_with_one_seat(tmp_path: Path) -> None:
    scripted = ScriptedModel([from_context(lead_spawns_a_worker)] * 8, record=False)
    async with live_app(tmp_path, scripted, max_concurrent=1) as live, live.client() as http:
        body = {"model": "lead", "messages": [{"role": "user", "content": "spawn a worker"}]}
        headers = {"X-Nexus-Session": "proj-y"}
        answer = await asyncio.wait_for(http.post("/v1/chat/completions", json=body, headers=headers), BOUND_S)
        assert answer.status_code == 200, answer.text
        assert "four" in answer.json()["choices"][0]["message"]["content"]
