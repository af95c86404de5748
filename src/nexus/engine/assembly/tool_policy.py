"""IAM-style tool filtering: allow and deny lists of names, globs and groups; deny always wins.

The broker resolves an agent's permissions before the run; this is the one place that
turns them into the tool list the model sees, so a denied tool is never even offered.
How an entry matches is defined once, in ``nexus.config`` (the ``[tools]`` table uses the
same rules): exact names, globs (``*``, ``?``, ``[..]``) and groups, ignoring case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nexus.config import TOOL_GROUPS, expand_tool_patterns, rule_allows, tool_matches
from nexus.errors import ConfigError

if TYPE_CHECKING:
    from nexus.agent import AgentTool

__all__ = ["TOOL_GROUPS", "filter_tools", "is_tool_allowed"]


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
    """Whether tool ``name`` passes the policy (an empty or absent ``allow`` allows all; deny wins)."""
    try:
        return rule_allows(name, allow, deny, _table(groups))
    except ValueError as exc:  # an empty entry or an unknown group
        raise ConfigError(str(exc)) from None


def filter_tools(
    tools: Sequence[AgentTool],
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> list[AgentTool]:
    """The tools the policy permits, in their original order.

    An empty or absent ``allow`` means no allow restriction, exactly as in ``nexus.toml``'s
    ``[tools]`` tables (one matcher: :func:`nexus.config._tool_names.rule_allows`).
    Entries are exact names, globs (``*``, ``?``, ``[..]``, case-insensitive) or group names
    (:data:`TOOL_GROUPS` plus ``groups``, whose keys may omit ``group:``). A tool matched by
    ``deny`` is removed even if allowed. Names are not checked against a tool list here:
    the tools passed in are the whole set (an application's own tools included).
    """
    allow, deny = list(allow or ()), list(deny or ())
    if not allow and not deny:  # no rule: every tool
        return list(tools)
    if not tools:  # nothing to decide: no entry is read (as rule_allows per tool would not)
        return []
    table = _table(groups)
    try:  # rule_allows per tool, with each list expanded once for all the tools (a run's start did it per tool)
        denied = expand_tool_patterns(deny, table, "deny")
        kept = [t for t in tools if not tool_matches(t.name, denied)]
        if not kept:  # every tool denied: the allow list is not read (as rule_allows per tool would not)
            return kept
        allowed = expand_tool_patterns(allow, table, "allow")
        return [t for t in kept if tool_matches(t.name, allowed)] if allowed else kept
    except ValueError as exc:  # an empty entry or an unknown group
        raise ConfigError(str(exc)) from None
