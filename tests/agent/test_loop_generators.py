"""What a run of the agent loop costs in async generators: every one is started and finished through the
event loop's hooks, and every event of the run passes through each that nests it. A run is one generator for
its turns and model calls, plus the model's own stream per call; the events and their order are unchanged."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

from nexus.agent import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from nexus.llm.types import TextContent, UserMessage

from .canned import MODEL, Canned, call, text, types


async def _run_counting(canned: Canned, ctx: AgentContext) -> tuple[list[AgentEvent], list[str]]:
    """The run's events, and the names of the async generators started while it ran."""
    started: list[str] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()

    def count(agen: Any) -> None:
        started.append(agen.__qualname__)
        if firstiter is not None:
            firstiter(agen)

    sys.set_asyncgen_hooks(firstiter=count, finalizer=finalizer)
    try:
        events: AsyncIterator[AgentEvent] = agent_loop(
            UserMessage("hi"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream)
        )
        got = [ev async for ev in events]
    finally:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
    return got, started


async def test_a_run_of_one_model_call_starts_two_async_generators() -> None:
    events, started = await _run_counting(Canned([text("ok")]), AgentContext("sys", [], []))
    assert types(events)[:2] == ["agent_start", "turn_start"] and types(events)[-2:] == ["turn_end", "agent_end"]
    assert started == ["_loop", "Canned.stream"]


async def test_each_further_model_call_adds_only_the_models_stream() -> None:
    from nexus.agent import tool

    @tool
    async def echo(x: int) -> str:
        """Echo a number back."""
        return f"echo {x}"

    canned = Canned([[TextContent("let me"), call("echo", {"x": 1})], text("done")])
    events, started = await _run_counting(canned, AgentContext("sys", [], [echo]))
    assert types(events).count("turn_start") == 2 and types(events)[-1] == "agent_end"
    assert started.count("_loop") == 1
    assert [name for name in started if not name.startswith("ToolBatch.")] == [
        "_loop",
        "Canned.stream",
        "Canned.stream",
    ]


async def test_once_its_prompts_are_in_the_context_the_run_holds_no_list_of_them() -> None:
    # the run's generator frame lives as long as the run streams: a thousand runs in flight each kept the list
    ctx = AgentContext("sys", [], [])
    prompt = UserMessage("hi")
    events = agent_loop([prompt], ctx, AgentLoopConfig(MODEL, stream_fn=Canned([text("ok")]).stream))
    seen = []
    async for event in events:
        seen.append(event.type)
        if seen.count("message_start") == 2:  # the prompt's, then the model's reply: the prompts were added
            break
    frame = events.ag_frame  # type: ignore[attr-defined]
    assert ctx.messages[0] is prompt  # (a new UserMessage("hi") differs by its timestamp when the clock ticks)
    assert "prompts" not in frame.f_locals, "the run's frame still holds its prompts"
    await events.aclose()  # type: ignore[attr-defined]
