"""The ``grep`` tool: regex/literal search with ripgrep when installed, a pure-Python walk otherwise."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexus.agent.tool_types import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.llm.abort import AbortSignal
from nexus.tools._args import opt_bool, opt_int, opt_str, req_str
from nexus.tools._truncate import MAX_BYTES, MAX_LINE_CHARS, cap_line, truncate_head
from nexus.tools._walk import find_binary, glob_match, walk
from nexus.tools._workspace import ToolError, Workspace

DEFAULT_LIMIT = 100
DESCRIPTION = (
    "Search file contents for a pattern (regex, or literal with literal=true). Returns matching lines as "
    "path:line: text (context lines as path-line- text), paths relative to the workspace. Respects .gitignore. "
    f"Output is limited to {DEFAULT_LIMIT} matches (change with limit) or {MAX_BYTES // 1024}KB; "
    f"long lines are cut to {MAX_LINE_CHARS} chars."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
        "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
        "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
        "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
        "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex"},
        "context": {"type": "number", "description": "Number of lines to show before and after each match"},
        "limit": {"type": "number", "description": f"Maximum number of matches to return (default: {DEFAULT_LIMIT})"},
    },
    "required": ["pattern"],
}


@dataclass(slots=True, frozen=True)
class GrepQuery:
    """A validated grep call."""

    pattern: str
    target: Path
    glob: str | None
    ignore_case: bool
    literal: bool
    context: int
    limit: int


@dataclass(slots=True, frozen=True)
class GrepLine:
    """One output line: a match or a context line."""

    path: Path
    line: int
    text: str
    is_match: bool


async def _rg(rg: str, q: GrepQuery, signal: AbortSignal) -> tuple[list[GrepLine], bool]:
    cmd = [rg, "--json", "--line-number", "--color=never", "--hidden", "--no-require-git", "--sort=path"]
    cmd += ["--glob=!.git"] + (["--ignore-case"] if q.ignore_case else []) + (["--fixed-strings"] if q.literal else [])
    cmd += (["--context", str(q.context)] if q.context else []) + (["--glob", q.glob] if q.glob else [])
    cmd += ["--", q.pattern, str(q.target)]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    out: list[GrepLine] = []
    matches = 0
    hit_limit = False
    stopped_early = False
    read_all = False
    remove = signal.add_listener(lambda: proc.kill() if proc.returncode is None else None)
    try:
        async for raw in proc.stdout:
            event = json.loads(raw)
            kind = event.get("type")
            if kind not in ("match", "context"):
                if hit_limit and kind == "end":
                    stopped_early = True
                    break
                continue
            if hit_limit and kind == "match":
                stopped_early = True
                break
            data = event["data"]
            lines = data["lines"]
            text = lines["text"] if "text" in lines else base64.b64decode(lines["bytes"]).decode("utf-8", "replace")
            path = data["path"].get("text") or base64.b64decode(data["path"]["bytes"]).decode("utf-8", "replace")
            out.append(GrepLine(Path(path), data["line_number"], text.rstrip("\r\n"), kind == "match"))
            matches += kind == "match"
            hit_limit = hit_limit or matches >= q.limit
        else:
            read_all = True
    finally:
        remove()
        if proc.returncode is None and not read_all:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        err = (await proc.stderr.read()).decode("utf-8", "replace").strip()
        code = await proc.wait()
    if signal.aborted:
        raise ToolError("Operation aborted.")
    if code not in (0, 1) and not stopped_early and err:
        raise ToolError(f"grep failed: {err}")
    return out, hit_limit


def _python_grep(q: GrepQuery, root: Path, signal: AbortSignal) -> tuple[list[GrepLine], bool]:
    try:
        regex = re.compile(re.escape(q.pattern) if q.literal else q.pattern, re.IGNORECASE if q.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regex {q.pattern!r}: {exc}. Fix it or pass literal=true.") from None
    if q.target.is_file():
        files = [q.target]
    else:
        # like ripgrep (without --follow): symlinks are skipped (one may point outside the workspace),
        # and so are FIFOs and devices (reading one would block)
        files = [
            p
            for p, _ in walk(root, q.target)
            if (not q.glob or glob_match(q.glob, p.relative_to(q.target).as_posix()))
            and not p.is_symlink()
            and p.is_file()
        ]
    out: list[GrepLine] = []
    matches = 0
    for file in files:
        if signal.aborted:
            raise ToolError("Operation aborted.")
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        lines = data.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hits = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))][: q.limit - matches]
        if not hits:
            continue
        hit_set = set(hits)
        shown: set[int] = set()
        for i in hits:
            shown.update(range(max(0, i - q.context), min(len(lines), i + q.context + 1)))
        out.extend(GrepLine(file, i + 1, lines[i].rstrip("\r"), i in hit_set) for i in sorted(shown))
        matches += len(hits)
        if matches >= q.limit:
            return out, True
    return out, False


def _format(ws: Workspace, lines: list[GrepLine], q: GrepQuery, hit_limit: bool) -> AgentToolResult:
    if not lines:
        return AgentToolResult.text("No matches found", details={"matches": 0})
    cut_any = False
    rendered: list[str] = []
    for gl in lines:
        text, cut = cap_line(gl.text)
        cut_any = cut_any or cut
        rendered.append(f"{ws.rel(gl.path)}{':' if gl.is_match else '-'}{gl.line}{':' if gl.is_match else '-'} {text}")
    trunc = truncate_head("\n".join(rendered), max_lines=len(rendered) + 1)
    notices: list[str] = []
    if hit_limit:
        notices.append(f"{q.limit} matches limit reached. Use limit={q.limit * 2} for more, or refine pattern")
    if trunc.truncated:
        notices.append(f"{MAX_BYTES // 1024}KB output limit reached")
    if cut_any:
        notices.append(f"Some lines truncated to {MAX_LINE_CHARS} chars. Use read tool to see full lines")
    text = trunc.content + ("\n\n[" + ". ".join(notices) + "]" if notices else "")
    count = sum(gl.is_match for gl in lines)
    return AgentToolResult.text(text, details={"matches": count, "limit_reached": hit_limit})


def _query(ws: Workspace, args: dict[str, Any]) -> GrepQuery:
    raw = opt_str(args, "path") or "."
    target = ws.resolve(raw)
    if not target.exists():
        raise ToolError(f"Path not found: {raw}.")
    return GrepQuery(
        pattern=req_str(args, "pattern", allow_empty=False),
        target=target,
        glob=opt_str(args, "glob") or None,
        ignore_case=opt_bool(args, "ignoreCase"),
        literal=opt_bool(args, "literal"),
        context=opt_int(args, "context", minimum=0) or 0,
        limit=opt_int(args, "limit", minimum=1) or DEFAULT_LIMIT,
    )


def grep_tool(ws: Workspace, *, use_ripgrep: bool = True) -> AgentTool:
    """The ``grep`` tool confined to ``ws``; ``use_ripgrep=False`` forces the pure-Python search."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        q = _query(ws, args)
        rg = find_binary("rg") if use_ripgrep else None
        if rg is not None:
            lines, hit_limit = await _rg(rg, q, signal)
        else:
            lines, hit_limit = await asyncio.to_thread(_python_grep, q, ws.root, signal)
        return _format(ws, lines, q, hit_limit)

    return AgentTool("grep", DESCRIPTION, PARAMETERS, execute, label="Grep")
