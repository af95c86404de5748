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


class _CountedEntry(str):
    """A list entry that counts how often it is read (each expansion of its list strips it)."""

    reads = 0

    def strip(self, chars: str | None = None) -> str:
        _CountedEntry.reads += 1
        return str.strip(self, chars)


FS_BUT_WRITE = ["read", "edit", "grep", "find", "ls", "apply_patch"]


def test_a_list_is_expanded_once_for_all_the_tools_not_once_per_tool() -> None:
    _CountedEntry.reads = 0
    assert names(allow=[_CountedEntry("group:fs")], deny=[_CountedEntry("write")]) == FS_BUT_WRITE
    assert _CountedEntry.reads <= 4  # one expansion of each list (before: one per tool, 38 reads for 10 tools)


@pytest.mark.parametrize(
    ("allow", "deny"),
    [
        (None, None), ([], []), (["group:fs"], None), (["READ", "b*"], ["bash"]), (["group:nope"], None),
        (["group:nope"], ["*"]), ([" "], ["read"]), (["read"], [" "]), (["group:nope"], ["group:fs"]),
        (["mcp:github"], []),
    ],
)  # fmt: skip
@pytest.mark.parametrize("tools", [TOOLS, [], TOOLS[:1]])
def test_the_tools_kept_and_the_errors_are_those_of_the_rule_for_each_tool(
    allow: list[str] | None, deny: list[str] | None, tools: list[AgentTool]
) -> None:
    from nexus.config import rule_allows

    try:
        expected: list[str] | str = [t.name for t in tools if rule_allows(t.name, allow, deny)]
    except ValueError as exc:
        expected = str(exc)
    try:
        got: list[str] | str = [t.name for t in filter_tools(tools, allow, deny)]
    except ConfigError as exc:
        got = str(exc)
    assert got == expected
