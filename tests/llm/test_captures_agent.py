"""Through ``agent_loop``: a tool call whose arguments never finished is never run (as ``{}`` or otherwise).

The model is the real Anthropic decoder reading captured streams from FakeProviderServer;
the tool records every execution. Its parameters all have defaults, so ``{}`` would be
valid arguments: exactly the call that must not happen.
"""

from __future__ import annotations

from pathlib import Path

from nexus.agent import AgentContext, AgentEvent, AgentLoopConfig, agent_loop, tool
from nexus.agent.events import ToolExecutionStartEvent
from nexus.llm import Model, StreamOptions, UserMessage
from nexus.llm.types import AssistantMessage, ToolResultMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import replay, text

CAPTURES = Path(__file__).parent / "captures"


def _write_tool(executed: list[dict[str, str]]) -> object:
    @tool
    async def write(path: str = "untitled.txt", content: str = "") -> str:
        """Write a file (here: only record that it ran)."""
        executed.append({"path": path, "content": content})
        return f"wrote {path}"

    return write


async def _run(server: FakeProviderServer, executed: list[dict[str, str]]) -> tuple[AgentContext, list[AgentEvent]]:
    model = Model(
        id="claude-captured", provider="anthropic", api="anthropic-messages", base_url=server.anthropic_base_url
    )
    context = AgentContext(tools=[_write_tool(executed)])  # type: ignore[list-item]
    config = AgentLoopConfig(model=model, options=StreamOptions(api_key="sk-test"))
    events = [event async for event in agent_loop(UserMessage("tidy up"), context, config)]
    return context, events


async def test_a_tool_call_abandoned_by_a_restart_is_not_run() -> None:
    executed: list[dict[str, str]] = []
    async with FakeProviderServer(replay(CAPTURES / "anthropic-restart-drops-tool-call.capture")) as server:
        context, events = await _run(server, executed)
        server.assert_complete()
    assert executed == []
    assert not any(isinstance(e, ToolExecutionStartEvent) for e in events)
    final = context.messages[-1]
    assert isinstance(final, AssistantMessage) and final.text == "I will not change any file."


async def test_a_tool_call_never_closed_is_reported_to_the_model_not_run() -> None:
    executed: list[dict[str, str]] = []
    steps = (replay(CAPTURES / "anthropic-unfinished-tool-call.capture", 37), text("Sorry, I will try again."))
    async with FakeProviderServer(*steps) as server:
        context, _ = await _run(server, executed)
        server.assert_complete()
    assert executed == []
    result = next(m for m in context.messages if isinstance(m, ToolResultMessage))
    assert result.is_error and result.tool_call_id == "toolu_01Open"
    assert "cut off before its arguments were complete" in result.text and "not run" in result.text
    final = context.messages[-1]
    assert isinstance(final, AssistantMessage) and final.text == "Sorry, I will try again."
