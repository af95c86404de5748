"""Tool allow/deny entries: the one implementation of how they match and how they are checked.

Used by the config's :class:`~nexus.config.ToolPolicy` and by ``nexus.engine.assembly.tool_policy``,
so a list means the same thing wherever it is written. An entry is an exact tool name, a
glob (``*``, ``?``, ``[..]``) or a group name (``group:fs``…); matching ignores case.
Stdlib only: the config layer imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "TOOL_GROUPS",
    "expand_tool_patterns",
    "tool_matches",
    "unknown_tool_entries",
]

TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "group:fs": ("read", "write", "edit", "apply_patch", "ls", "find", "grep"),
    "group:read": ("read", "ls", "find", "grep"),
    "group:write": ("write", "edit", "apply_patch"),
    "group:runtime": ("bash",),
    "group:agents": ("send_message_to_agent", "get_agent_status", "spawn_agent"),
}
"""Names usable in tool policy lists instead of single tools (``*`` means every tool)."""

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "read",
    "write",
    "edit",
    "apply_patch",
    "ls",
    "find",
    "grep",
    "bash",
    "spawn_agent",
    "send_message_to_agent",
    "get_agent_status",
)
"""Every tool the engine itself can offer (the coding tools, ``spawn_agent`` and the agent tools)."""

_GLOB_CHARS = frozenset("*?[")


def expand_tool_patterns(
    patterns: Iterable[str], groups: Mapping[str, Sequence[str]] | None = None, which: str = "allow"
) -> list[str]:
    """Lower-cased entries with ``group:`` names replaced by their members; ValueError for a bad entry."""
    table = TOOL_GROUPS if groups is None else groups
    out: list[str] = []
    for raw in patterns:
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError(f"tool {which} list has an empty or non-text entry {raw!r}; use tool names or globs")
        pattern = raw.strip().lower()
        if pattern.startswith("group:"):
            members = table.get(pattern)
            if members is None:
                known = ", ".join(sorted(table))
                raise ValueError(f"unknown tool group {raw!r} in the {which} list; known groups: {known}")
            out.extend(m.lower() for m in members)
        else:
            out.append(pattern)
    return out


def tool_matches(name: str, expanded: Sequence[str]) -> bool:
    """Whether tool ``name`` matches one of the (already expanded) entries, ignoring case."""
    lowered = name.lower()
    return any(fnmatchcase(lowered, p) if _GLOB_CHARS & set(p) else lowered == p for p in expanded)


def rule_allows(
    name: str,
    allow: Iterable[str] | None,
    deny: Iterable[str] | None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """The one reading of an allow/deny pair: deny always wins; an empty (or absent) allow allows all.

    ``nexus.toml``'s ``[tools]`` tables and ``nexus.engine.filter_tools`` both decide with this,
    so a policy means the same wherever it is written.
    """
    if tool_matches(name, expand_tool_patterns(deny or (), groups, "deny")):
        return False
    allowed = expand_tool_patterns(allow or (), groups, "allow")
    return not allowed or tool_matches(name, allowed)


def unknown_tool_entries(entries: Iterable[str], known: Iterable[str] = BUILTIN_TOOL_NAMES) -> list[str]:
    """One problem per plain name in ``entries`` that is no known tool (globs and groups are not names).

    Each problem names the entry and, when one is close, the tool it was probably meant to be.
    """
    names = sorted({k.lower() for k in known})
    problems = []
    for entry in entries:
        lowered = entry.strip().lower()
        if not lowered or lowered.startswith("group:") or _GLOB_CHARS & set(lowered) or lowered in names:
            continue
        import difflib  # for a suggestion in an error message only

        close = difflib.get_close_matches(lowered, [*names, *TOOL_GROUPS], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        problems.append(f"unknown tool {entry!r}: {hint}known tools: {', '.join(names)} (and groups, globs)")
    return problems
