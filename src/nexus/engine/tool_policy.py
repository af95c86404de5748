"""IAM-style tool filtering: allow and deny lists of names, globs and groups; deny always wins.

The broker resolves an agent's permissions before the run; this is the one place that
turns them into the tool list the model sees, so a denied tool is never even offered.
How an entry matches is defined once, in ``nexus.config`` (the ``[tools]`` table uses the
same rules): exact names, globs (``*``, ``?``, ``[..]``) and groups, ignoring case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nexus.config._tool_names import TOOL_GROUPS, expand_tool_patterns, tool_matches
from nexus.errors import ConfigError

if TYPE_CHECKING:
    from nexus.agent.tool_types import AgentTool

__all__ = ["TOOL_GROUPS", "filter_tools", "is_tool_allowed"]


def _expand(patterns: Iterable[str], groups: Mapping[str, Sequence[str]], which: str) -> list[str]:
    try:
        return expand_tool_patterns(patterns, groups, which)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _table(groups: Mapping[str, Sequence[str]] | None) -> Mapping[str, Sequence[str]]:
    if not groups:
        return TOOL_GROUPS
    extra = {(k.lower() if k.lower().startswith("group:") else f"group:{k.lower()}"): v for k, v in groups.items()}
    return {**TOOL_GROUPS, **extra}


def is_tool_allowed(
    name: str,
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """Whether tool ``name`` passes the policy (``allow=None`` allows all; deny wins over allow)."""
    table = _table(groups)
    if tool_matches(name, _expand(deny or (), table, "deny")):
        return False
    return allow is None or tool_matches(name, _expand(allow, table, "allow"))


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
    ``deny`` is removed even if allowed. Names are not checked against a tool list here:
    the tools passed in are the whole set (an application's own tools included).
    """
    table = _table(groups)
    allowed = None if allow is None else _expand(allow, table, "allow")
    denied = _expand(deny or (), table, "deny")
    return [t for t in tools if not tool_matches(t.name, denied) and (allowed is None or tool_matches(t.name, allowed))]
