"""The ``find`` tool: files and directories by glob, with fd when installed, a pure-Python walk otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from nexus.agent import MAX_BYTES, AgentTool, AgentToolResult, ToolUpdateFn, truncate_head
from nexus.llm import AbortSignal
from nexus.tools._args import opt_int, opt_str, req_str
from nexus.tools._specs import FIND_DEFAULT_LIMIT as DEFAULT_LIMIT
from nexus.tools._specs import declare
from nexus.tools._walk import IgnoreChecker, find_binary, pure_python_forced
from nexus.tools._workspace import ToolError, Workspace
from nexus.tools.grep import _WORKER
from nexus.tools.grep import _stream as stream_lines

DEFAULT_TIMEOUT = 60.0
"""Seconds a search may take before it is stopped."""


def _glob_escape(text: str) -> str:
    """A literal path inside a glob (directory names may contain ``[``, ``*`` …)."""
    return "".join(f"[{c}]" if c in "[]*?{}" else c for c in text)


async def _fd(fd: str, root: Path, target: Path, pattern: str, limit: int, signal: AbortSignal) -> list[Path]:
    cmd = [fd, "--glob", "--color=never", "--hidden", "--case-sensitive", "--exclude", ".git"]
    cmd += ["--max-results", str(limit + 1)]
    for d in [target, *target.parents]:
        if not (d == root or d.is_relative_to(root)):
            break
        if (d / ".gitignore").is_file():
            cmd += ["--ignore-file", str(d / ".gitignore")]
    if "/" in pattern.rstrip("/"):
        cmd += ["--full-path", f"{_glob_escape(str(target))}/{pattern.lstrip('/')}"]
    else:
        cmd += [pattern]
    cmd += [str(target)]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    remove = signal.add_listener(lambda: proc.kill() if proc.returncode is None else None)
    try:
        out, err = await proc.communicate()
    finally:
        remove()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    if signal.aborted:
        raise ToolError("Operation aborted.")
    if proc.returncode not in (0, 1):
        raise ToolError(f"find failed: {err.decode('utf-8', 'replace').strip()}")
    # fd (8.x) reads nested .gitignore files only inside git repositories: filter like git would
    checker = IgnoreChecker(root)
    found = [Path(line.rstrip("/")) for line in out.decode("utf-8", "replace").splitlines() if line]
    return [p for p in found if not checker.ignored(p, p.is_dir())]


async def _python_find(root: Path, target: Path, pattern: str, limit: int, signal: AbortSignal) -> list[Path]:
    """The walk in a killable child process (see :mod:`nexus.tools._pysearch`): a catastrophic glob
    in a thread would hold the GIL and freeze the time limit, the abort and the signal handlers."""
    query = {"mode": "find", "glob": pattern, "limit": limit, "root": str(root), "target": str(target)}
    query["parent"] = os.getpid()
    found: list[Path] = []

    def on_line(raw: bytes) -> bool:
        found.append(Path(json.loads(raw)["p"]))
        return len(found) <= limit

    cmd = [sys.executable or "python3", "-E", "-s", "-S", str(_WORKER)]
    code, err = await stream_lines(cmd, json.dumps(query).encode("utf-8"), signal, on_line)
    if code != 0 and not signal.aborted and len(found) <= limit:
        raise ToolError(f"find failed: {err.splitlines()[-1] if err else f'exit code {code}'}")
    return found


async def _search(
    ws: Workspace, target: Path, pattern: str, limit: int, signal: AbortSignal, limit_s: float | None, use_fd: bool
) -> list[Path]:
    fd = find_binary("fd", "fdfind") if use_fd and not pure_python_forced() else None
    try:
        async with asyncio.timeout(limit_s):
            if fd is not None:
                return await _fd(fd, ws.root, target, pattern, limit, signal)
            paths = await _python_find(ws.root, target, pattern, limit, signal)
    except TimeoutError:
        if signal.aborted:
            raise ToolError("Operation aborted.") from None
        raise ToolError(
            f"find stopped after {limit_s:g} seconds (its time limit): search a smaller directory or use a "
            "narrower pattern."
        ) from None
    if signal.aborted:
        raise ToolError("Operation aborted.")
    return paths


def find_tool(ws: Workspace, *, use_fd: bool = True, timeout: float | None = DEFAULT_TIMEOUT) -> AgentTool:
    """The ``find`` tool confined to ``ws``.

    ``use_fd=False`` (or ``NEXUS_PURE_PYTHON_SEARCH=1``) forces the pure-Python walk; ``timeout``
    (seconds, ``None`` = none) stops a walk over a huge tree with an error the model can act on.
    """

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        pattern = req_str(args, "pattern", allow_empty=False)
        raw = opt_str(args, "path") or "."
        limit = opt_int(args, "limit", minimum=1) or DEFAULT_LIMIT
        target = ws.resolve(raw)
        if not target.is_dir():
            raise ToolError(f"Not a directory: {raw}." if target.exists() else f"Path not found: {raw}.")
        paths = await _search(ws, target, pattern, limit, signal, timeout, use_fd)
        if not paths:
            return AgentToolResult.text(f"No files found matching pattern {pattern!r}", details={"count": 0})
        hit_limit = len(paths) > limit
        names = sorted(ws.rel(p) + ("/" if p.is_dir() else "") for p in paths)[:limit]
        trunc = truncate_head("\n".join(names), max_lines=len(names) + 1)
        notices = []
        if hit_limit:
            notices.append(f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern")
        if trunc.truncated:
            notices.append(f"{MAX_BYTES // 1024}KB output limit reached")
        text = trunc.content + ("\n\n[" + ". ".join(notices) + "]" if notices else "")
        return AgentToolResult.text(text, details={"count": len(names), "limit_reached": hit_limit})

    return declare("find", execute)
