"""The ``grep`` tool: regex/literal search with ripgrep when installed, a pure-Python walk otherwise."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus.agent import MAX_BYTES, MAX_LINE_CHARS, AgentTool, AgentToolResult, ToolUpdateFn, cap_line, truncate_head
from nexus.llm import AbortSignal
from nexus.tools._args import opt_bool, opt_int, opt_str, req_str
from nexus.tools._specs import GREP_DEFAULT_LIMIT as DEFAULT_LIMIT
from nexus.tools._specs import declare
from nexus.tools._walk import find_binary, pure_python_forced
from nexus.tools._workspace import ToolError, Workspace, refuse_hard_link

DEFAULT_TIMEOUT = 60.0
"""Seconds a search may take before it is stopped."""


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


_LINE_LIMIT = 64 * 1024 * 1024
"""Longest stdout line read from a search process (ripgrep's JSON carries whole lines)."""
_WORKER = Path(__file__).with_name("_pysearch.py")


async def _stream(
    cmd: list[str], stdin: bytes, signal: AbortSignal, on_line: Callable[[bytes], bool]
) -> tuple[int, str]:
    """Run a search process, feeding each stdout line to ``on_line`` until it returns False.

    The process is killed when ``on_line`` has enough, on abort, and when the caller's task is
    cancelled (the tool's timeout): a search never outlives its call. Returns (exit code, stderr);
    the code is -9 when the process was killed.
    """
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    errors = asyncio.create_task(proc.stderr.read())  # read alongside: a full stderr pipe would block the child

    def kill() -> None:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    remove = signal.add_listener(kill)
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
            proc.stdin.close()
        async for raw in proc.stdout:
            if not on_line(raw):
                kill()
                break
    finally:
        remove()
        if not proc.stdout.at_eof():  # stopped early, aborted or timed out
            kill()
        code = await proc.wait()
        err = (await errors).decode("utf-8", "replace").strip()
    return code, err


class _Collector:
    """Output lines of one search, up to ``limit`` matches (plus the context lines after the last one).

    Lines of a file with several hard links are left out (``skipped``), as ``read`` refuses such a
    file: its other name may be outside the workspace.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lines: list[GrepLine] = []
        self.matches = 0
        self.stopped = False
        self.skipped: list[Path] = []
        self._one_name: dict[Path, bool] = {}

    def add(self, line: GrepLine) -> bool:
        """Keep ``line``; False once the next match would pass the limit (stop reading)."""
        if not self._has_one_name(line.path):
            return True
        if line.is_match and self.matches >= self.limit:
            self.stopped = True
            return False
        self.lines.append(line)
        self.matches += line.is_match
        return True

    @property
    def hit_limit(self) -> bool:
        return self.matches >= self.limit

    def _has_one_name(self, path: Path) -> bool:
        """False for a regular file with several hard links (one ``stat`` per file that has output)."""
        known = self._one_name.get(path)
        if known is None:
            try:
                found = os.stat(path)
            except OSError:
                found = None
            known = found is None or not (stat.S_ISREG(found.st_mode) and found.st_nlink > 1)
            self._one_name[path] = known
            if not known:
                self.skipped.append(path)
        return known


async def _rg(rg: str, q: GrepQuery, signal: AbortSignal) -> _Collector:
    cmd = [rg, "--json", "--line-number", "--color=never", "--hidden", "--no-require-git", "--sort=path"]
    cmd += ["--glob=!.git"] + (["--ignore-case"] if q.ignore_case else []) + (["--fixed-strings"] if q.literal else [])
    cmd += (["--context", str(q.context)] if q.context else []) + (["--glob", q.glob] if q.glob else [])
    cmd += ["--", q.pattern, str(q.target)]
    found = _Collector(q.limit)

    def on_line(raw: bytes) -> bool:
        event = json.loads(raw)
        kind = event.get("type")
        if kind not in ("match", "context"):
            return not (found.hit_limit and kind == "end")  # the file with the last match is done
        data = event["data"]
        lines = data["lines"]
        text = lines["text"] if "text" in lines else base64.b64decode(lines["bytes"]).decode("utf-8", "replace")
        path = data["path"].get("text") or base64.b64decode(data["path"]["bytes"]).decode("utf-8", "replace")
        return found.add(GrepLine(Path(path), data["line_number"], text.rstrip("\r\n"), kind == "match"))

    code, err = await _stream(cmd, b"", signal, on_line)
    if signal.aborted:
        raise ToolError("Operation aborted.")
    if code not in (0, 1) and not found.stopped and not found.hit_limit and err:
        raise ToolError(f"grep failed: {err}")
    return found


async def _python_grep(q: GrepQuery, root: Path, signal: AbortSignal) -> _Collector:
    """The search without ripgrep, in a killable child process (see :mod:`nexus.tools._pysearch`)."""
    try:
        re.compile(re.escape(q.pattern) if q.literal else q.pattern, re.IGNORECASE if q.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regex {q.pattern!r}: {exc}. Fix it or pass literal=true.") from None
    query = {
        "pattern": q.pattern,
        "literal": q.literal,
        "ignore_case": q.ignore_case,
        "context": q.context,
        "limit": q.limit,
        "glob": q.glob,
        "root": str(root),
        "target": str(q.target),
        "parent": os.getpid(),
    }
    found = _Collector(q.limit)

    def on_line(raw: bytes) -> bool:
        rec = json.loads(raw)
        return found.add(GrepLine(Path(rec["p"]), rec["l"], rec["t"], rec["m"]))

    cmd = [sys.executable or "python3", "-E", "-s", "-S", str(_WORKER)]
    code, err = await _stream(cmd, json.dumps(query).encode("utf-8"), signal, on_line)
    if signal.aborted:
        raise ToolError("Operation aborted.")
    if code != 0 and not found.stopped:
        raise ToolError(f"grep failed: {err.splitlines()[-1] if err else f'exit code {code}'}")
    return found


def _format(ws: Workspace, found: _Collector, q: GrepQuery) -> AgentToolResult:
    lines, hit_limit = found.lines, found.hit_limit
    skipped = _skipped_notice(ws, found.skipped)
    if not lines:
        text = "No matches found" + (f"\n\n[{skipped}]" if skipped else "")
        return AgentToolResult.text(text, details={"matches": 0})
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
    if skipped:
        notices.append(skipped)
    text = trunc.content + ("\n\n[" + ". ".join(notices) + "]" if notices else "")
    count = sum(gl.is_match for gl in lines)
    return AgentToolResult.text(text, details={"matches": count, "limit_reached": hit_limit})


def _skipped_notice(ws: Workspace, skipped: list[Path]) -> str:
    """The notice naming the files left out for their several hard links ("" when none)."""
    if not skipped:
        return ""
    shown = ", ".join(ws.rel(path) for path in skipped[:5])
    if len(skipped) > 5:
        shown += f" and {len(skipped) - 5} more"
    noun = "file" if len(skipped) == 1 else "files"
    return f"Skipped {len(skipped)} {noun} with several hard links (maybe a file outside the workspace): {shown}"


def _query(ws: Workspace, args: dict[str, Any]) -> GrepQuery:
    raw = opt_str(args, "path") or "."
    target = ws.resolve(raw)
    if not target.exists():
        raise ToolError(f"Path not found: {raw}.")
    refuse_hard_link(target.stat(), raw, "grep", "search")
    return GrepQuery(
        pattern=req_str(args, "pattern", allow_empty=False),
        target=target,
        glob=opt_str(args, "glob") or None,
        ignore_case=opt_bool(args, "ignoreCase"),
        literal=opt_bool(args, "literal"),
        context=opt_int(args, "context", minimum=0) or 0,
        limit=opt_int(args, "limit", minimum=1) or DEFAULT_LIMIT,
    )


def grep_tool(ws: Workspace, *, use_ripgrep: bool = True, timeout: float | None = DEFAULT_TIMEOUT) -> AgentTool:
    """The ``grep`` tool confined to ``ws``.

    ``use_ripgrep=False`` (or ``NEXUS_PURE_PYTHON_SEARCH=1``) forces the pure-Python search;
    ``timeout`` (seconds, ``None`` = none) stops a search that runs too long (a huge tree, a
    catastrophic regex) with an error the model can act on.
    """

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        q = _query(ws, args)
        rg = find_binary("rg") if use_ripgrep and not pure_python_forced() else None
        try:
            async with asyncio.timeout(timeout):
                found = await _rg(rg, q, signal) if rg is not None else await _python_grep(q, ws.root, signal)
        except TimeoutError:
            raise ToolError(
                f"grep stopped after {timeout:g} seconds (its time limit): search a smaller path or glob, "
                "or simplify the pattern."
            ) from None
        return _format(ws, found, q)

    return declare("grep", execute)
