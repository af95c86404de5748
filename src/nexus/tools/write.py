"""The ``write`` tool: create or overwrite a file, making parent directories.

The file is replaced atomically (temporary file, fsync, rename; see :mod:`nexus.tools._atomic`):
a full disk or a crash leaves the old content, never a truncated file.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.llm import AbortSignal
from nexus.tools._args import req_str
from nexus.tools._atomic import check_target, replace_file
from nexus.tools._specs import declare
from nexus.tools._workspace import ToolError, Workspace


def write_tool(ws: Workspace) -> AgentTool:
    """The ``write`` tool confined to ``ws``."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        raw = req_str(args, "path", allow_empty=False)
        content = req_str(args, "content")
        path = ws.resolve(raw)
        if path.is_dir():
            raise ToolError(f"{raw} is a directory; give a file path.")
        data = content.encode("utf-8")
        if signal.aborted:
            raise ToolError("Operation aborted; the file was not written.")
        async with ws.lock(path):
            check_target(path, raw, "write")
            await asyncio.to_thread(replace_file, path, data, raw)
        return AgentToolResult.text(
            f"Successfully wrote {len(data)} bytes to {raw}", details={"path": ws.rel(path), "bytes": len(data)}
        )

    return declare("write", execute)
