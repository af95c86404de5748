"""A tool's declaration to the model (``AgentTool.as_llm_tool``) is made once and shared by the runs that
offer the tool: it must follow the tool when a field is reassigned, and no run can change it for another."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nexus.agent import AgentTool, AgentToolResult
from nexus.llm import AbortSignal


async def _execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


def _tool() -> AgentTool:
    return AgentTool("look", "Look at a thing.", {"type": "object", "properties": {}}, _execute)


def test_a_tool_is_declared_once_for_all_its_runs() -> None:
    tool = _tool()
    first = tool.as_llm_tool()
    assert tool.as_llm_tool() is first
    assert (first.name, first.description, first.parameters) == (tool.name, tool.description, tool.parameters)


def test_the_declaration_follows_a_reassigned_field() -> None:
    tool = _tool()
    first = tool.as_llm_tool()
    tool.description = "Look harder."
    assert tool.as_llm_tool().description == "Look harder." and first.description == "Look at a thing."
    tool.name = "peek"
    assert tool.as_llm_tool().name == "peek"
    tool.parameters = {"type": "object", "properties": {"x": {"type": "string"}}}
    assert tool.as_llm_tool().parameters is tool.parameters
    renamed = dataclasses.replace(tool, name="glance")
    assert renamed.as_llm_tool().name == "glance" and tool.as_llm_tool().name == "peek"


def test_a_shared_declaration_cannot_be_changed_by_a_run() -> None:
    declared = _tool().as_llm_tool()
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.description = "changed"  # type: ignore[misc]


def test_the_cache_is_not_part_of_the_tool_value() -> None:
    tool, other = _tool(), _tool()
    tool.as_llm_tool()
    assert tool == other and "_declared" not in repr(tool)
    assert [f.name for f in dataclasses.fields(AgentTool) if f.init] == [
        "name", "description", "parameters", "execute", "label", "validate", "sequential", "metadata",
    ]  # fmt: skip
