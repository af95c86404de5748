"""The ``ls`` tool: one directory, sorted case-insensitively, ``/`` after directories, dotfiles included."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from nexus.agent import MAX_BYTES, AgentTool, AgentToolResult, ToolUpdateFn, truncate_head
from nexus.llm import AbortSignal
from nexus.tools._args import opt_int, opt_str
from nexus.tools._specs import LS_DEFAULT_LIMIT as DEFAULT_LIMIT
from nexus.tools._specs import declare
from nexus.tools._workspace import ToolError, Workspace


def _entries(path: Path) -> list[str]:
    out: list[str] = []
    with os.scandir(path) as it:
        for entry in it:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            out.append(entry.name + ("/" if is_dir else ""))
    out.sort(key=lambda name: (name.lower(), name))
    return out


def ls_tool(ws: Workspace) -> AgentTool:
    """The ``ls`` tool confined to ``ws``."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        raw = opt_str(args, "path") or "."
        limit = opt_int(args, "limit", minimum=1) or DEFAULT_LIMIT
        path = ws.resolve(raw)
        if not path.exists():
            raise ToolError(f"Path not found: {raw}.")
        if not path.is_dir():
            raise ToolError(f"Not a directory: {raw}; use the read tool for files.")
        entries = await asyncio.to_thread(_entries, path)
        if not entries:
            return AgentToolResult.text("(empty directory)", details={"entries": 0})
        shown = entries[:limit]
        trunc = truncate_head("\n".join(shown), max_lines=len(shown) + 1)
        text = trunc.content
        notices = []
        if len(entries) > limit:
            notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
        if trunc.truncated:
            notices.append(f"{MAX_BYTES // 1024}KB output limit reached")
        if notices:
            text += "\n\n[" + ". ".join(notices) + "]"
        return AgentToolResult.text(text, details={"entries": len(entries), "limit_reached": len(entries) > limit})

    return declare("ls", execute)
