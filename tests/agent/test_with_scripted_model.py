"""The agent against nexus.testing.ScriptedModel (real chunked provider events, steps as users write them)."""

from __future__ import annotations

from nexus.agent import Agent, AgentEvent, tool
from nexus.llm.types import AssistantMessage, ToolResultMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import http_error, reply, text, tool_call


@tool
async def lookup(city: str, days: int = 1) -> str:
    """Weather forecast for a city."""
    return f"{city}: sunny for {days} day(s)"


async def test_tool_round_trip_with_scripted_model() -> None:
    scripted = ScriptedModel(
        [reply(text("Checking."), tool_call("lookup", {"city": "Oslo", "days": "2"})), text("Sunny.")]
    )
    agent = Agent(model=scripted.model, stream_fn=scripted.stream, tools=[lookup])
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    await agent.prompt("Weather in Oslo?")
    scripted.assert_complete()
    result = agent.state.messages[2]
    assert isinstance(result, ToolResultMessage) and result.text == "Oslo: sunny for 2 day(s)"
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage) and final.text == "Sunny." and agent.state.error is None
    assert [m.role for m in scripted.calls[1].messages] == ["user", "assistant", "tool_result"]
    assert scripted.calls[0].tools[0].name == "lookup"
    assert sum(1 for e in events if e.type == "message_update") > 2  # streamed in chunks


async def test_provider_error_from_scripted_model_sets_state_error() -> None:
    scripted = ScriptedModel([http_error(429, "slow down", retry_after=3)])
    agent = Agent(model=scripted.model, stream_fn=scripted.stream)
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.state.error == last.error_message and agent.state.error
