"""IAM-style tool filtering: allow and deny lists of names, globs and groups; deny always wins.

The broker resolves an agent's permissions before the run; this is the one place that
turns them into the tool list the model sees, so a denied tool is never even offered.
How an entry matches is defined once, in ``nexus.config`` (the ``[tools]`` table uses the
same rules): exact names, globs (``*``, ``?``, ``[..]``) and groups, ignoring case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nexus.config import TOOL_GROUPS, rule_allows
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
    allow, deny, table = list(allow or ()), list(deny or ()), _table(groups)
    try:
        return [t for t in tools if rule_allows(t.name, allow, deny, table)]
    except ValueError as exc:  # an empty entry or an unknown group
        raise ConfigError(str(exc)) from None
