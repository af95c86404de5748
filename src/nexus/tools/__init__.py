"""Coding tools for agents, confined to one workspace directory.

``coding_tools(workspace)`` returns pi-compatible ``read``, ``write``, ``edit``, ``bash``,
``grep``, ``find``, ``ls`` and ``apply_patch`` tools (same model-facing names and
parameters as pi, so sessions move between the two). Every path the model passes is
resolved through one :class:`Workspace`; anything outside its root is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from nexus.agent.tool_types import AgentTool
from nexus.tools._workspace import ToolError, Workspace, WorkspaceError
from nexus.tools.apply_patch import apply_patch_tool
from nexus.tools.bash import DEFAULT_TIMEOUT, bash_tool
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

ALL_TOOLS: tuple[str, ...] = ("read", "write", "edit", "bash", "grep", "find", "ls", "apply_patch")
"""Tool names in the order :func:`coding_tools` returns them."""


def coding_tools(
    workspace: Path | str | Workspace,
    *,
    bash_timeout: float | None = DEFAULT_TIMEOUT,
    enabled: Iterable[str] | None = None,
) -> list[AgentTool]:
    """The coding tool set for one workspace (all eight unless ``enabled`` names a subset).

    ``bash_timeout`` is the default bash timeout in seconds when the model gives none
    (``None`` = no default timeout). Unknown names in ``enabled`` raise :class:`ToolError`.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    factories: dict[str, Callable[[], AgentTool]] = {
        "read": lambda: read_tool(ws),
        "write": lambda: write_tool(ws),
        "edit": lambda: edit_tool(ws),
        "bash": lambda: bash_tool(ws, timeout=bash_timeout),
        "grep": lambda: grep_tool(ws),
        "find": lambda: find_tool(ws),
        "ls": lambda: ls_tool(ws),
        "apply_patch": lambda: apply_patch_tool(ws),
    }
    names = list(ALL_TOOLS) if enabled is None else list(dict.fromkeys(enabled))
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ToolError(f"Unknown tool name(s) {unknown}; known tools: {', '.join(ALL_TOOLS)}.")
    return [factories[n]() for n in names]
