"""A long tool result keeps the tool's own notice ("use offset=…", the saved output's path) through every cut.

A trial found it cut three times: by the tool (50 KB and a notice), by the run's ``max_tool_result_chars``
(which took the notice), then in every view of the history (which took the run's marker): the model was
told ~150 characters were missing of a 200,000-character output, and never how to see the rest.
"""

from __future__ import annotations

from typing import Any

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ToolResultMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call

NOTICE = "[Showing lines 1-984 of 3000. Use offset=985 to continue.]"
OUTPUT = "\n".join(f"line {n:04d} of the file" for n in range(1, 985)) + "\n\n" + NOTICE  # ~23,000 chars


def _read_like() -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        return AgentToolResult.text(OUTPUT)

    return AgentTool("readish", "reads a long file", {"type": "object", "properties": {}}, execute)


def _results(messages: list[Any]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolResultMessage)]


async def test_the_model_gets_the_tools_notice_once_cut_by_the_runs_cap(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("readish", {}, id="r1"), text("noted"), text("again")])
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, tools=[_read_like()],
                  limits=EngineLimits(max_tool_result_chars=5_000), cooldowns=ProfileCooldowns())  # fmt: skip
    result = await env.start(AgentSpec(model=scripted.model), "main", "read it").result
    assert result.stop_reason == "end_turn", result
    (seen,) = _results(scripted.calls[1].messages)
    assert len(seen) <= 5_000 and seen.endswith(NOTICE), seen[-300:]
    assert "truncated the last" in seen and "lines" in seen  # the model learns which lines it did not get
    head = await ledger.sessions.head("main")
    assert head is not None
    (stored,) = _results([m.message for m in await ledger.turns.messages(head.id)])
    assert stored == seen  # one cut: what the ledger keeps is what the model read
    await env.start(AgentSpec(model=scripted.model), "main", "and now?").result
    (later,) = _results(scripted.calls[2].messages)
    assert later == seen  # the next turn's view does not cut it again


async def test_the_default_cap_leaves_a_builtin_tools_own_cut_alone(ledger: Ledger) -> None:
    limits = EngineLimits()
    builtin_cut = 50 * 1024 + len(NOTICE) + 2  # the tools' own cap (50 KB) and their notice
    assert limits.max_tool_result_chars > builtin_cut
    assert load_config().agent.max_tool_result_chars == limits.max_tool_result_chars
