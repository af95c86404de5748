"""The ``apply_patch`` tool: unified diffs over several files, all-or-nothing."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.llm import AbortSignal
from nexus.tools._args import req_str
from nexus.tools._atomic import Staging, check_target, describe
from nexus.tools._patch_parse import FilePatch, Hunk, parse_patch
from nexus.tools._specs import declare
from nexus.tools._workspace import ToolError, Workspace


@dataclass(slots=True)
class _Change:
    path: Path
    shown: str
    content: str | None  # None = delete
    mode: str | None = None


_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _split_lines(text: str) -> list[str]:
    """Lines with their EOL kept (only ``\\n`` ends a line, as in git)."""
    lone_cr = "\r" in text and text.count("\r") != text.count("\r\n")
    if not lone_cr and not any(ch in text for ch in _OTHER_BREAKS):
        return text.splitlines(keepends=True)  # same result here, several times faster
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _matches(file_lines: list[str], at: int, old: list[str], loose: bool) -> bool:
    if at < 0 or at + len(old) > len(file_lines):
        return False
    if not loose:
        return file_lines[at : at + len(old)] == old
    return all(a.rstrip() == b.rstrip() for a, b in zip(file_lines[at : at + len(old)], old, strict=True))


def _locate(file_lines: list[str], hunk: Hunk, old: list[str], floor: int, guess: int) -> tuple[int, bool] | None:
    """Where ``old`` matches, nearest to ``guess`` and not before ``floor``; (position, loose).

    Like ``git apply``: a hunk with leading context but none trailing was cut short by the end
    of the file, so it is tried there first (and one starting at line 1 at the top). A hunk
    with no context at all (``diff -U0``) says nothing about the file's ends: its line
    numbers are trusted instead (a pure insertion there would otherwise match anywhere).
    """
    trailing_ctx = next((i for i, (op, _) in enumerate(reversed(hunk.lines)) if op != " "), 0)
    leading_ctx = next((i for i, (op, _) in enumerate(hunk.lines) if op != " "), 0)
    zero_context = leading_ctx == 0 and trailing_ctx == 0
    anchored: list[int] = []
    if old and (hunk.old_start == 0 or (hunk.old_start == 1 and not zero_context)):
        anchored.append(0)
    if trailing_ctx == 0 and not zero_context:
        anchored.append(len(file_lines) - len(old))
    for loose in (False, True):
        for pos in anchored:
            if pos >= floor and _matches(file_lines, pos, old, loose):
                return pos, loose
        span = max(guess - floor, len(file_lines) - guess) + 1
        for delta in range(span):
            for pos in (guess - delta, guess + delta) if delta else (guess,):
                if pos >= floor and _matches(file_lines, pos, old, loose):
                    return pos, loose
    return None


def _fail(fp: FilePatch, n: int, hunk: Hunk, old: list[str], file_lines: list[str], guess: int) -> ToolError:
    want = "".join(f"    {line}" for line in old[:8]).rstrip("\n")
    near = "".join(f"    {line}" for line in file_lines[max(0, guess) : max(0, guess) + min(8, len(old))])
    return ToolError(
        f"Patch failed: {fp.display}: hunk #{n} ({hunk.header}) does not apply: its context/removed lines were "
        f"not found in the file.\n  Expected:\n{want}\n  Near line {guess + 1} the file has:\n{near.rstrip()}\n"
        "No files were changed. Re-read the file and regenerate the hunk with exact context lines."
    )


def apply_hunks(fp: FilePatch, text: str) -> str:
    """``text`` after every hunk of ``fp`` (raises :class:`ToolError` naming the failing hunk)."""
    file_lines = _split_lines(text)
    crlf = "\r" in text and text.count("\r\n") * 2 > text.count("\n")
    out: list[str] = []
    at = 0
    shift = 0
    for n, hunk in enumerate(fp.hunks, 1):
        old = [t for op, t in hunk.lines if op != "+"]
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        found = _locate(file_lines, hunk, old, at, max(at, start + shift))
        if found is None:
            raise _fail(fp, n, hunk, old, file_lines, max(at, start + shift))
        pos, loose = found
        out.extend(file_lines[at:pos])
        src = pos
        for op, t in hunk.lines:
            if op == " ":
                out.append(file_lines[src])
                src += 1
            elif op == "-":
                src += 1
            else:
                out.append(t[:-1] + "\r\n" if loose and crlf and t.endswith("\n") and not t.endswith("\r\n") else t)
        shift = pos - start
        at = src
    out.extend(file_lines[at:])
    return "".join(out)


class _Plan:
    """The in-memory result of the whole patch: path -> new text (``None`` = deleted)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.state: dict[Path, _Change] = {}
        self.summary: list[str] = []

    def read(self, shown: str) -> tuple[Path, str | None]:
        path = self.ws.resolve(shown)
        if path in self.state:
            return path, self.state[path].content
        if not path.exists():
            return path, None
        if path.is_dir():
            raise ToolError(f"Patch failed: {shown} is a directory. No files were changed.")
        try:
            return path, path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"Patch failed: {shown} is not UTF-8 text. No files were changed.") from None

    def link_path(self, shown: str) -> Path | None:
        """The symlink itself when ``shown`` names one (in a directory inside the workspace), else ``None``."""
        name = Path(shown).name
        if name in ("", ".", ".."):
            return None
        path = self.ws.resolve(str(Path(shown).parent)) / name
        return path if path.is_symlink() else None

    def add(self, fp: FilePatch) -> None:
        if fp.binary:
            raise ToolError(f"Patch failed: {fp.display}: binary patches are not supported. No files were changed.")
        if fp.old_path is None:
            assert fp.new_path is not None
            path, current = self.read(fp.new_path)
            if current is not None:
                raise ToolError(
                    f"Patch failed: {fp.new_path} already exists but the patch creates it (--- /dev/null). "
                    "No files were changed."
                )
            self.state[path] = _Change(path, fp.new_path, apply_hunks(fp, ""), fp.new_mode)
            self.summary.append(f"A {fp.new_path}")
            return
        src, current = self.read(fp.old_path)
        if current is None:
            raise ToolError(f"Patch failed: {fp.old_path} does not exist. No files were changed.")
        result = apply_hunks(fp, current)
        if fp.new_path is None:
            if result:
                raise ToolError(
                    f"Patch failed: {fp.old_path}: the patch deletes the file but does not remove all of its "
                    "content. No files were changed."
                )
            link = self.link_path(fp.old_path)
            if link is not None:  # delete the link the patch names, not the file it points to
                src = link
            self.state[src] = _Change(src, fp.old_path, None)
            self.summary.append(f"D {fp.old_path}")
            return
        dst = self.ws.resolve(fp.new_path)
        if dst != src:
            if self.read(fp.new_path)[1] is not None:
                raise ToolError(f"Patch failed: rename target {fp.new_path} already exists. No files were changed.")
            self.state[src] = _Change(src, fp.old_path, None)
            self.summary.append(f"R {fp.old_path} -> {fp.new_path}")
        else:
            self.summary.append(f"M {fp.new_path}")
        self.state[dst] = _Change(dst, fp.new_path, result, fp.new_mode)


def _commit(changes: list[_Change]) -> None:
    """Stage every new content (synced temporaries), then rename them all and delete; ``OSError`` while
    staging leaves every file untouched (:class:`~nexus.tools._atomic.Staging`)."""
    staging = Staging()
    try:
        for ch in changes:
            if ch.content is not None:
                staging.stage(ch.path, ch.content.encode("utf-8"), executable=ch.mode == "100755")
    except OSError as exc:
        staging.discard()
        raise ToolError(f"Writing the patched files failed: {describe(exc)}; no file was changed.") from None
    for ch in changes:
        if ch.content is None:
            staging.remove(ch.path)
    try:
        staging.commit()
    except OSError as exc:  # a rename or delete refused after staging (append-only file, EIO): undone
        staging.discard()
        if staging.unrestored:
            changed = ", ".join(str(path) for path in staging.unrestored)
            raise ToolError(
                f"Writing the patched files failed part-way: {describe(exc)}; these could not be put back: {changed}."
            ) from None
        raise ToolError(f"Writing the patched files failed: {describe(exc)}; no file was changed.") from None


def plan_patch(ws: Workspace, patch: str | list[FilePatch]) -> tuple[list[_Change], list[str]]:
    """Every file's new content computed in memory (nothing written); raises on the first failure."""
    plan = _Plan(ws)
    for fp in parse_patch(patch) if isinstance(patch, str) else patch:
        plan.add(fp)
    return list(plan.state.values()), plan.summary


def _touched(ws: Workspace, files: list[FilePatch]) -> list[Path]:
    paths = {ws.resolve(p) for fp in files for p in (fp.old_path, fp.new_path) if p is not None}
    return sorted(paths, key=str)


def apply_patch_tool(ws: Workspace) -> AgentTool:
    """The ``apply_patch`` tool confined to ``ws``."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        patch = req_str(args, "patch", allow_empty=False)
        files = parse_patch(patch)
        async with contextlib.AsyncExitStack() as stack:
            for path in _touched(ws, files):  # sorted: two patches never lock in opposite orders
                await stack.enter_async_context(ws.lock(path))
            changes, summary = await asyncio.to_thread(plan_patch, ws, files)
            if signal.aborted:
                raise ToolError("Operation aborted; no files were changed.")
            for ch in changes:
                if ch.content is not None:
                    check_target(ch.path, ch.shown, "apply_patch")
            await asyncio.to_thread(_commit, changes)
        return AgentToolResult.text("Applied patch:\n" + "\n".join(summary), details={"files": summary})

    return declare("apply_patch", execute)
