"""Coding tools for agents, confined to one workspace directory.

``coding_tools(workspace)`` returns pi-compatible ``read``, ``write``, ``edit``, ``bash``,
``grep``, ``find``, ``ls`` and ``apply_patch`` tools (same model-facing names and
parameters as pi, so sessions move between the two). Every path the model passes is
resolved through one :class:`Workspace`; anything outside its root is refused.

What the model is told comes from ``nexus.tools._specs``; a tool's implementation is imported
the first time the model calls it (a run that calls no tool imports none of them). The
``*_tool`` factories are imported on first use too.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.tools._specs import BASH_DEFAULT_TIMEOUT, TOOLS, declare
from nexus.tools._workspace import ToolError, Workspace, WorkspaceError

if TYPE_CHECKING:
    from nexus.llm import AbortSignal
    from nexus.tools.apply_patch import apply_patch_tool
    from nexus.tools.bash import bash_tool
    from nexus.tools.edit import edit_tool
    from nexus.tools.find import find_tool
    from nexus.tools.grep import grep_tool
    from nexus.tools.ls import ls_tool
    from nexus.tools.read import read_tool
    from nexus.tools.write import write_tool

__all__ = [
    "ALL_TOOLS",
    "ToolError",
    "Workspace",
    "WorkspaceError",
    "apply_patch_tool",
    "bash_tool",
    "coding_tools",
    "edit_tool",
    "find_tool",
    "grep_tool",
    "ls_tool",
    "read_tool",
    "write_tool",
]

ALL_TOOLS: tuple[str, ...] = tuple(TOOLS)
"""Tool names in the order :func:`coding_tools` returns them."""

_LAZY = {f"{name}_tool": f".{name}" for name in ALL_TOOLS}


def __getattr__(name: str) -> Any:
    """Import a ``*_tool`` factory (and its tool's implementation) on first use."""
    return lazy_attribute(__name__, _LAZY, globals(), name)


def coding_tools(
    workspace: Path | str | Workspace,
    *,
    bash_timeout: float | None = BASH_DEFAULT_TIMEOUT,
    enabled: Iterable[str] | None = None,
) -> list[AgentTool]:
    """The coding tool set for one workspace (all eight unless ``enabled`` names a subset).

    ``bash_timeout`` is the default bash timeout in seconds when the model gives none
    (``None`` = no default timeout). Unknown names in ``enabled`` raise :class:`ToolError`.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    names = list(ALL_TOOLS) if enabled is None else list(dict.fromkeys(enabled))
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ToolError(f"Unknown tool name(s) {unknown}; known tools: {', '.join(ALL_TOOLS)}.")
    return [_deferred(name, ws, bash_timeout) for name in names]


def _deferred(name: str, ws: Workspace, bash_timeout: float | None) -> AgentTool:
    """Tool ``name`` as its spec declares it; the implementation is built on the first call and kept."""
    options: dict[str, Any] = {"timeout": bash_timeout} if name == "bash" else {}
    built: list[AgentTool] = []

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        if not built:
            factory = getattr(importlib.import_module(f"nexus.tools.{name}"), f"{name}_tool")
            built.append(factory(ws, **options))
        return await built[0].execute(call_id, args, signal, on_update)

    if name == "bash":
        from nexus.tools._specs import bash_description

        return declare(name, execute, description=bash_description(bash_timeout))
    return declare(name, execute)
