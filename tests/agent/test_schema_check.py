"""Hand-written AgentTools (no ``validate``) get their arguments checked against ``parameters`` by the loop."""

from __future__ import annotations

from typing import Any

from nexus.agent import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    agent_loop,
)
from nexus.agent._schema import check_arguments
from nexus.agent.tool_types import ToolUpdateFn
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ToolResultMessage, UserMessage

from .canned import MODEL, Canned, call, text

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
    },
    "required": ["path", "count"],
}


async def test_bad_arguments_become_an_error_result_and_the_tool_does_not_run() -> None:
    received: list[dict[str, Any]] = []
    hooked: list[dict[str, Any]] = []

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        received.append(args)
        return AgentToolResult.text("ran")

    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
        hooked.append(ctx.args)

    tool = AgentTool("job", "A hand-written tool.", SCHEMA, execute)
    calls = [
        call("job", {"count": "x", "mode": "medium", "items": [{"n": 1}, {}]}, id="bad"),
        call("job", {"path": "a.txt", "count": "3", "ratio": "0.5", "force": "true", "mode": None}, id="good"),
    ]
    canned = Canned([calls, text("done")])
    ctx = AgentContext(tools=[tool])
    config = AgentLoopConfig(MODEL, stream_fn=canned.stream, before_tool_call=before)
    async for _ in agent_loop(UserMessage("go"), ctx, config):
        pass
    bad, good = (m for m in ctx.messages if isinstance(m, ToolResultMessage))
    assert bad.is_error
    assert bad.text.startswith('Validation failed for tool "job":\n')
    for problem in (
        "  - path: required property is missing",
        '  - count: must be integer, got "x"',
        '  - mode: must be one of "fast", "slow", got "medium"',
        "  - items[1].n: required property is missing",
    ):
        assert problem in bad.text
    assert '"count": "x"' in bad.text  # the arguments received are shown back
    assert not good.is_error and good.text == "ran"
    # the tool and the hook saw coerced values (like AJV's coerceTypes), the bad call never ran
    expected = {"path": "a.txt", "count": 3, "ratio": 0.5, "force": True, "mode": None}
    assert received == [expected] and hooked == [expected]


def test_check_arguments_leaves_unknown_keywords_and_types_alone() -> None:
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    assert check_arguments("t", schema, {"x": [1, 2], "extra": 1}) == {"x": [1, 2], "extra": 1}
    assert check_arguments("t", {"type": "object"}, {"a": 1}) == {"a": 1}
    assert check_arguments("t", {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}, {"n": "2"}) == {
        "n": 2
    }
