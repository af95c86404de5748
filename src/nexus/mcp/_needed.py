"""Which MCP servers a run could use, decided from names alone (no server is started to find out).

A run starts only the servers whose tools its policy could allow: a server ``fs`` is needed unless
an applicable deny list covers every ``fs__*`` name, or an applicable allow list (or the agent's own
tool list) has no entry that could match an ``fs__…`` name. Globs are judged by what they could
match, so the answer errs towards starting a server (its tools are filtered by name afterwards).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from nexus.config import MCP_SEPARATOR, NexusConfig, expand_tool_patterns

_GLOB = frozenset("*?[")


def servers_for(
    config: NexusConfig,
    session_label: str | None = None,
    role: str | None = None,
    agent_tools: Sequence[str] | None = None,
) -> list[str]:
    """The enabled servers a run of ``role`` in ``session_label`` could take tools from.

    ``agent_tools`` is the agent's own narrowing list (``AgentSpec.tools``; None = no narrowing).
    """
    if agent_tools is not None and not agent_tools:
        return []  # an agent with no tools at all
    policy = config.tools
    rules = [(policy.allow, policy.deny)]
    if session_label is not None and session_label in policy.sessions:
        rules.append((policy.sessions[session_label].allow, policy.sessions[session_label].deny))
    if role is not None and role in policy.roles:
        rules.append((policy.roles[role].allow, policy.roles[role].deny))
    if agent_tools is not None:
        rules.append((list(agent_tools), []))
    return [name for name in config.mcp.enabled() if all(_could_allow(name, allow, deny) for allow, deny in rules)]


def _could_allow(server: str, allow: Iterable[str], deny: Iterable[str]) -> bool:
    prefix = f"{server}{MCP_SEPARATOR}"
    if any(_covers(prefix, pattern) for pattern in expand_tool_patterns(deny, which="deny")):
        return False
    allowed = expand_tool_patterns(allow)
    return not allowed or any(_may_match(prefix, pattern) for pattern in allowed)


def _may_match(prefix: str, pattern: str) -> bool:
    """Could ``pattern`` match some name that starts with ``prefix``?"""
    cut = next((i for i, char in enumerate(pattern) if char in _GLOB), len(pattern))
    literal = pattern[:cut]
    if cut == len(pattern):
        return literal.startswith(prefix) and len(literal) > len(prefix)
    return literal.startswith(prefix) or prefix.startswith(literal)


def _covers(prefix: str, pattern: str) -> bool:
    """Does ``pattern`` match every name that starts with ``prefix``? (No tool name holds a NUL.)"""
    return fnmatchcase(prefix + "\x00", pattern) and fnmatchcase(prefix + "\x00\x00\x00", pattern)
