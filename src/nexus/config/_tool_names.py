"""Tool allow/deny entries: the one implementation of how they match and how they are checked.

Used by the config's :class:`~nexus.config.ToolPolicy` and by ``nexus.engine.assembly.tool_policy``,
so a list means the same thing wherever it is written. An entry is an exact tool name, a
glob (``*``, ``?``, ``[..]``) or a group name (``group:fs``…); matching ignores case.
Stdlib only: the config layer imports nothing above it.

MCP servers' tools are named ``<server>__<tool>`` (``MCP_SEPARATOR``), and ``mcp:<server>``,
``mcp:<server>/<glob>`` or ``mcp:*`` stand for some or all of them (docs/mcp.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "MCP_SEPARATOR",
    "MCP_SERVER_NAME",
    "TOOL_GROUPS",
    "expand_tool_patterns",
    "mcp_tool_name",
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

MCP_SEPARATOR = "__"
"""Between an MCP server's name and its tool's name: ``fs__read_file``. No built-in tool and no
server name contains it, so a server's tools can never clash with another's or with the built-ins."""

_MCP_PREFIX = "mcp:"


MCP_SERVER_NAME = r"^[a-z0-9](?:[a-z0-9-]|_(?!_)){0,31}(?<!_)$"
"""An MCP server's name (a regex): 1-32 lower-case letters, digits, ``-`` and single ``_`` (not
last), so that ``<server>__`` is a prefix no other server's tools share."""

MAX_TOOL_NAME = 64
"""The longest tool name every provider accepts (OpenAI's limit; Anthropic allows more)."""

_NOT_NAME = r"[^A-Za-z0-9_-]"
_NOT_NAME_OR_GLOB = r"[^a-z0-9_*?\[\]!-]"


def mcp_tool_name(server: str, tool: str, *, distinct: bool = False) -> str:
    """The name the model sees for ``tool`` of MCP server ``server``: ``<server>__<tool>``.

    Characters providers refuse in tool names (``.``, ``/``, spaces…) become ``_``; a name over
    :data:`MAX_TOOL_NAME` is cut and ends in 8 hex digits of a hash of the tool's own name, as does
    every name with ``distinct`` (for a tool whose cleaned name another tool of the server has).
    """
    name = f"{server}{MCP_SEPARATOR}{re.sub(_NOT_NAME, '_', tool)}"
    if len(name) <= MAX_TOOL_NAME and not distinct:
        return name
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def _mcp_entry(pattern: str, which: str) -> str:
    """``mcp:fs`` → ``fs__*``, ``mcp:fs/read_*`` → ``fs__read_*``, ``mcp:*`` → ``*__*``."""
    server, slash, tools = pattern[len(_MCP_PREFIX) :].partition("/")
    if not server or (slash and not tools):
        raise ValueError(
            f"tool {which} list has a malformed entry {pattern!r}; write mcp:SERVER, mcp:SERVER/TOOL_GLOB or mcp:*"
        )
    return f"{server}{MCP_SEPARATOR}{re.sub(_NOT_NAME_OR_GLOB, '_', tools) if tools else '*'}"


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
        elif pattern.startswith(_MCP_PREFIX):
            out.append(_mcp_entry(pattern, which))
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
    if not allow and not deny:  # no rule (the usual table): nothing to expand or match
        return True
    if tool_matches(name, expand_tool_patterns(deny or (), groups, "deny")):
        return False
    allowed = expand_tool_patterns(allow or (), groups, "allow")
    return not allowed or tool_matches(name, allowed)


def unknown_tool_entries(
    entries: Iterable[str], known: Iterable[str] = BUILTIN_TOOL_NAMES, mcp_servers: Iterable[str] | None = ()
) -> list[str]:
    """One problem per plain name in ``entries`` that is no known tool (globs and groups are not names).

    Each problem names the entry and, when one is close, the tool it was probably meant to be.
    ``<server>__<tool>`` names and ``mcp:<server>…`` entries are checked against ``mcp_servers``
    (the tool part cannot be checked without starting the server); ``None`` accepts any server
    (where the configuration is not at hand).
    """
    names = sorted({k.lower() for k in known})
    servers = None if mcp_servers is None else sorted({s.lower() for s in mcp_servers})
    problems = []
    for entry in entries:
        lowered = entry.strip().lower()
        server = _mcp_server_of(lowered)
        if server is not None:
            if servers is not None and server != "*" and server not in servers:
                problems.append(_unknown_server(entry, server, servers))
            continue
        if not lowered or lowered.startswith("group:") or _GLOB_CHARS & set(lowered) or lowered in names:
            continue
        import difflib  # for a suggestion in an error message only

        close = difflib.get_close_matches(lowered, [*names, *TOOL_GROUPS], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        problems.append(f"unknown tool {entry!r}: {hint}known tools: {', '.join(names)} (and groups, globs)")
    return problems


def _mcp_server_of(entry: str) -> str | None:
    """The server an ``mcp:`` entry or a ``server__tool`` name refers to (``*`` for ``mcp:*``), else None."""
    if entry.startswith(_MCP_PREFIX):
        return entry[len(_MCP_PREFIX) :].partition("/")[0] or None
    server, sep, tool = entry.partition(MCP_SEPARATOR)
    if sep and server and tool and not _GLOB_CHARS & set(server):
        return server
    return None


def _unknown_server(entry: str, server: str, servers: Sequence[str]) -> str:
    import difflib  # for a suggestion in an error message only

    close = difflib.get_close_matches(server, servers, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    known = ", ".join(servers) if servers else "none configured"
    return f"{entry!r} names MCP server {server!r}, which is not in [mcp.servers]: {hint}known servers: {known}"
