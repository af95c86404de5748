"""IAM-style tool filtering."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.engine.assembly.tool_policy import filter_tools, is_tool_allowed
from nexus.errors import ConfigError
from nexus.llm.abort import AbortSignal


async def _noop(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


NAMES = ["read", "write", "edit", "bash", "grep", "find", "ls", "apply_patch", "mcp_github_search", "Web_Fetch"]
TOOLS = [AgentTool(n, f"{n} tool", {"type": "object"}, _noop) for n in NAMES]


def names(allow: list[str] | None = None, deny: list[str] | None = None, **kw: Any) -> list[str]:
    return [t.name for t in filter_tools(TOOLS, allow, deny, **kw)]


def test_no_lists_allow_everything_in_order() -> None:
    assert names() == NAMES


def test_empty_allow_list_reads_like_the_config_an_allow_all() -> None:
    # one matcher: nexus.toml's [tools] allow = [] and filter_tools(allow=[]) mean the same
    from nexus.config import ToolPolicy

    assert names(allow=[]) == NAMES == names(allow=None)
    policy = ToolPolicy(allow=[], deny=["bash"])
    assert [n for n in NAMES if policy.is_allowed(n)] == names(allow=[], deny=["bash"])
    assert all(is_tool_allowed(n, allow=[]) for n in NAMES)


def test_allow_exact_names_and_globs_case_insensitive() -> None:
    assert names(allow=["read", "mcp_*"]) == ["read", "mcp_github_search"]
    assert names(allow=["web_*"]) == ["Web_Fetch"]
    assert names(allow=["?s"]) == ["ls"]
    assert names(allow=["*"]) == NAMES


def test_deny_wins_over_allow() -> None:
    assert names(allow=["*"], deny=["bash", "mcp_*"]) == [n for n in NAMES if n not in ("bash", "mcp_github_search")]
    assert names(allow=["bash"], deny=["*"]) == []


def test_groups_expand_and_custom_groups_work() -> None:
    assert names(allow=["group:read"]) == ["read", "grep", "find", "ls"]
    assert names(deny=["group:fs"]) == ["bash", "mcp_github_search", "Web_Fetch"]
    assert names(allow=["group:web"], groups={"web": ["web_*"]}) == ["Web_Fetch"]


def test_bad_entries_are_rejected_with_a_clear_message() -> None:
    with pytest.raises(ConfigError, match=r"unknown tool group .group:nope.*known groups"):
        names(allow=["group:nope"])
    with pytest.raises(ConfigError, match="deny list has an empty"):
        names(deny=[" "])


def test_is_tool_allowed() -> None:
    assert is_tool_allowed("bash")
    assert not is_tool_allowed("bash", deny=["group:runtime"])
    assert is_tool_allowed("read", allow=["group:fs"], deny=["bash"])
    assert not is_tool_allowed("write", allow=["group:read"])
