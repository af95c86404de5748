"""The loop against nexus.testing.ScriptedModel (real chunked provider events, steps as users write them)."""

from __future__ import annotations

from nexus.agent import tool
from nexus.llm.types import AssistantMessage, ToolResultMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import http_error, reply, text, tool_call

from .queued import Queued


@tool
async def lookup(city: str, days: int = 1) -> str:
    """Weather forecast for a city."""
    return f"{city}: sunny for {days} day(s)"


async def test_tool_round_trip_with_scripted_model() -> None:
    scripted = ScriptedModel(
        [reply(text("Checking."), tool_call("lookup", {"city": "Oslo", "days": "2"})), text("Sunny.")]
    )
    agent = Queued(scripted.model, scripted.stream, tools=[lookup])
    await agent.prompt("Weather in Oslo?")
    events = agent.events
    scripted.assert_complete()
    result = agent.messages[2]
    assert isinstance(result, ToolResultMessage) and result.text == "Oslo: sunny for 2 day(s)"
    final = agent.messages[-1]
    assert isinstance(final, AssistantMessage) and final.text == "Sunny." and agent.error is None
    assert [m.role for m in scripted.calls[1].messages] == ["user", "assistant", "tool_result"]
    assert scripted.calls[0].tools[0].name == "lookup"
    assert sum(1 for e in events if e.type == "message_update") > 2  # streamed in chunks


async def test_provider_error_from_scripted_model_is_the_runs_error() -> None:
    scripted = ScriptedModel([http_error(429, "slow down", retry_after=3)])
    agent = Queued(scripted.model, scripted.stream)
    await agent.prompt("hi")
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.error == last.error_message and agent.error
