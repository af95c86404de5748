"""Token estimates and budgets."""

from __future__ import annotations

from typing import Any

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.engine.assembly.budget import (
    compute_budget,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tools_tokens,
    should_compact,
)
from nexus.llm.abort import AbortSignal
from nexus.llm.types import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


async def _noop(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


def tool(name: str) -> AgentTool:
    return AgentTool(name, "d" * 40, {"type": "object", "properties": {}}, _noop)


def test_message_estimates() -> None:
    assert estimate_message_tokens(UserMessage("x" * 400)) == 100
    assert estimate_message_tokens(UserMessage("x" * 401)) == 101
    assert (
        estimate_message_tokens(UserMessage([TextContent("x" * 40), ImageContent("A" * 9_999, "image/png")])) == 1_210
    )
    call = AssistantMessage(content=[ToolCall("c", "read", {"path": "a.txt"})])
    assert estimate_message_tokens(call) == -(-(len("read") + len('{"path": "a.txt"}')) // 4)
    assert estimate_message_tokens(ToolResultMessage("c", "read", [TextContent("y" * 80)])) == 20


def test_context_estimate_uses_reported_usage_then_estimates_newer_messages() -> None:
    reported = AssistantMessage(content=[TextContent("hi")], usage=Usage(input=1_000, output=50, cache_read=2_000))
    failed = AssistantMessage(stop_reason="error", usage=Usage(input=99_999))
    messages: list[Message] = [UserMessage("x" * 4_000), reported, UserMessage("y" * 400), failed]
    assert estimate_context_tokens(messages) == 3_050 + 100
    assert estimate_context_tokens([UserMessage("z" * 40)]) == 10


def test_compute_budget_by_layer_with_capped_reserves() -> None:
    model = Model("m", "p", "a", context_window=200_000, max_tokens=8_192)
    tools = [tool("read"), tool("bash")]
    budget = compute_budget(
        model,
        system_prompt="s" * 4_000,
        history=[UserMessage("h" * 8_000)],
        current=UserMessage("c" * 400),
        tools=tools,
    )
    assert (budget.system, budget.history, budget.current) == (1_000, 2_000, 100)
    assert budget.tools == estimate_tools_tokens(tools) > 0
    assert (budget.reserve_output, budget.reserve_compaction) == (8_192, 16_384)
    assert not should_compact(budget)
    small = compute_budget(
        Model("s", "p", "a", context_window=8_000, max_tokens=8_000), history=[UserMessage("h" * 20_000)]
    )
    assert (small.reserve_output, small.reserve_compaction) == (2_000, 2_000)
    assert should_compact(small)
    custom = compute_budget(model, max_response_tokens=1_000, reserve_tokens=0)
    assert (custom.reserve_output, custom.reserve_compaction) == (1_000, 0)
