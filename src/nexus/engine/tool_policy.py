"""IAM-style tool filtering: allow and deny lists of names, globs and groups; deny always wins.

The broker resolves an agent's permissions before the run; this is the one place that
turns them into the tool list the model sees, so a denied tool is never even offered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from nexus.errors import ConfigError

if TYPE_CHECKING:
    from nexus.agent.tool_types import AgentTool

TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "group:fs": ("read", "write", "edit", "apply_patch", "grep", "find", "ls"),
    "group:read": ("read", "grep", "find", "ls"),
    "group:write": ("write", "edit", "apply_patch"),
    "group:runtime": ("bash",),
    "group:agents": ("send_message_to_agent", "get_agent_status", "spawn_agent"),
}
"""Built-in group names usable in allow/deny lists (``group:fs`` = every file tool…)."""

_GLOB_CHARS = frozenset("*?[")


def _expand(patterns: Iterable[str], groups: Mapping[str, Sequence[str]], which: str) -> list[str]:
    """Lower-cased patterns with ``group:`` names replaced by their members; bad entries raise."""
    out: list[str] = []
    for raw in patterns:
        if not isinstance(raw, str) or not raw.strip():
            raise ConfigError(f"tool {which} list has an empty or non-text entry {raw!r}; use tool names or globs")
        pattern = raw.strip().lower()
        if pattern.startswith("group:"):
            members = groups.get(pattern)
            if members is None:
                known = ", ".join(sorted(groups))
                raise ConfigError(f"unknown tool group {raw!r} in the {which} list; known groups: {known}")
            out.extend(m.lower() for m in members)
        else:
            out.append(pattern)
    return out


def _table(groups: Mapping[str, Sequence[str]] | None) -> Mapping[str, Sequence[str]]:
    if not groups:
        return TOOL_GROUPS
    extra = {(k.lower() if k.lower().startswith("group:") else f"group:{k.lower()}"): v for k, v in groups.items()}
    return {**TOOL_GROUPS, **extra}


def _matches(name: str, patterns: Sequence[str]) -> bool:
    lowered = name.lower()
    return any(fnmatchcase(lowered, p) if _GLOB_CHARS & set(p) else lowered == p for p in patterns)


def is_tool_allowed(
    name: str,
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """Whether tool ``name`` passes the policy (``allow=None`` allows all; deny wins over allow)."""
    table = _table(groups)
    denied = _expand(deny or (), table, "deny")
    if _matches(name, denied):
        return False
    return allow is None or _matches(name, _expand(allow, table, "allow"))


def filter_tools(
    tools: Sequence[AgentTool],
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> list[AgentTool]:
    """The tools the policy permits, in their original order.

    ``allow=None`` means no allow restriction, ``allow=[]`` means nothing is allowed.
    Entries are exact names, globs (``*``, ``?``, ``[..]``, case-insensitive) or group names
    (:data:`TOOL_GROUPS` plus ``groups``, whose keys may omit ``group:``). A tool matched by
    ``deny`` is removed even if allowed.
    """
    table = _table(groups)
    allowed = None if allow is None else _expand(allow, table, "allow")
    denied = _expand(deny or (), table, "deny")
    return [t for t in tools if not _matches(t.name, denied) and (allowed is None or _matches(t.name, allowed))]
