"""The ``bash`` tool: one shell command in the workspace, with a default timeout and a killable process group."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal as signals
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from nexus.agent import MAX_BYTES, MAX_LINES, AgentTool, AgentToolResult, ToolUpdateFn, format_size, truncate_tail
from nexus.llm import AbortSignal
from nexus.tools._args import opt_number, req_str
from nexus.tools._atomic import describe
from nexus.tools._janitor import janitor
from nexus.tools._reaper import find, marked_env, terminate
from nexus.tools._specs import BASH_DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from nexus.tools._specs import bash_description, declare
from nexus.tools._workspace import Workspace

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for the process group."""
DRAIN_AFTER_EXIT = 0.5
"""Seconds to keep reading after bash exits while a background child still holds the output pipe."""
UPDATE_INTERVAL = 0.1


class _Output:
    """Merged stdout+stderr: a bounded tail in memory, everything in a temp file once it grows large.

    A temp file that cannot be written (a full disk) never fails the call: the output is still
    returned, and the notice says why the full output was not saved.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._chunks: list[str] = []
        self._kept = 0
        self.total_bytes = 0
        self.spill_path: str | None = None
        self.spill_error: str | None = None
        self._spill: IO[bytes] | None = None
        self._raw: list[bytes] = []
        self.newlines = 0

    def _to_spill(self, data: list[bytes]) -> None:
        try:
            if self._spill is None:
                fd, path = janitor().spill_file()
                self._spill = os.fdopen(fd, "wb")
                self.spill_path = path
            self._spill.writelines(data)
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        """Give up on the temp file (a partial copy would mislead): remove it, remember why."""
        self.spill_error = describe(exc)
        spill, self._spill = self._spill, None
        if spill is not None:
            with contextlib.suppress(OSError):
                spill.close()
        if self.spill_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.spill_path)
            self.spill_path = None

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        if self.spill_error is None:
            if self._spill is None:
                self._raw.append(data)
                if self.total_bytes > MAX_BYTES:
                    self._to_spill(self._raw)
                    self._raw = []
            else:
                self._to_spill([data])
        text = self._decoder.decode(data)
        self.newlines += text.count("\n")
        self._chunks.append(text)
        self._kept += len(text)
        while self._kept > 4 * MAX_BYTES and len(self._chunks) > 1:
            self._kept -= len(self._chunks.pop(0))

    def ensure_spill(self) -> str:
        """Where the whole output is (written now if not yet), or why it could not be saved."""
        if self.spill_path is None and self.spill_error is None:
            self._to_spill(self._raw)
            self._raw = []
        if self.spill_path is None:
            return f"Full output not saved: {self.spill_error}"
        return f"Full output: {self.spill_path}"

    def close(self) -> None:
        self._chunks.append(self._decoder.decode(b"", final=True))
        spill, self._spill = self._spill, None
        if spill is not None:
            try:
                spill.close()
            except OSError as exc:  # the last buffered bytes did not fit
                self._fail(exc)

    def text(self) -> str:
        return "".join(self._chunks)


class _Process:
    """A ``/bin/bash -c`` child in its own session, read through the event loop (no threads).

    ``asyncio``'s subprocess ``wait()`` only returns once every pipe is closed, so a backgrounded
    grandchild holding stdout would block it; exit is watched through a pidfd (or polling) instead,
    without reaping: bash stays a zombie until :meth:`end` has ended the rest of the call's
    processes, so its pid (the session and group id) cannot be reused by an unrelated process
    in between.
    """

    def __init__(self, command: str, cwd: Path, out: _Output, on_update: ToolUpdateFn) -> None:
        self._loop = asyncio.get_running_loop()
        self._out = out
        self._on_update = on_update
        self._last_update = 0.0
        self.token = janitor().token()
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=marked_env(self.token),
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self.eof = asyncio.Event()
        self.exited = asyncio.Event()
        self._loop.add_reader(self._fd, self._readable)
        self._pidfd: int | None = None
        self._poller: asyncio.Task[None] | None = None
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
            self._loop.add_reader(self._pidfd, self._reap)
        except (AttributeError, OSError):
            self._poller = asyncio.create_task(self._poll())

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(self._fd)
            self.eof.set()
            return
        self._out.feed(data)
        now = time.monotonic()
        if now - self._last_update >= UPDATE_INTERVAL:
            self._last_update = now
            self._on_update(AgentToolResult.text(truncate_tail(self._out.text()).content, details={"partial": True}))

    def _has_exited(self) -> bool:
        """Whether bash has exited, leaving it unreaped (a zombie) for :meth:`end`."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _reap(self) -> None:
        if self._has_exited():
            if self._pidfd is not None:
                self._loop.remove_reader(self._pidfd)
            self.exited.set()

    async def _poll(self) -> None:
        while not self._has_exited():  # noqa: ASYNC110 - fallback where pidfd_open is missing
            await asyncio.sleep(0.05)
        self.exited.set()

    async def end(self) -> int:
        """End every process of the call (see :mod:`nexus.tools._reaper`), then reap bash; its exit code."""
        await asyncio.to_thread(end_call, self.token, self.proc.pid, KILL_GRACE)
        return await asyncio.to_thread(self.proc.wait)

    def close(self) -> None:
        """Stop reading (drain what is buffered), release the fds."""
        while not self.eof.is_set():
            self._loop.remove_reader(self._fd)
            before = self._out.total_bytes
            self._readable()
            if self._out.total_bytes == before:
                break
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self._poller is not None:
            self._poller.cancel()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def end_call(token: str, pid: int, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` s, every process of one call: its session and its mark.

    Without ``/proc`` (not Linux) only the process group can be found.
    """
    if os.path.isdir("/proc/self"):
        terminate(find(lambda marks: token in marks, sessions={pid}), grace)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signals.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            os.killpg(pid, 0)
            time.sleep(0.05)
        os.killpg(pid, signals.SIGKILL)


async def _run(
    command: str, cwd: Path, limit: float | None, signal: AbortSignal, on_update: ToolUpdateFn, out: _Output
) -> tuple[int | None, str | None]:
    """(exit code, None) or (None, "timeout"/"aborted"); every process the command started is ended."""
    child = _Process(command, cwd, out, on_update)
    exited = asyncio.create_task(child.exited.wait())
    aborted = asyncio.create_task(signal.wait())
    stopped: str | None = None
    try:
        done, _ = await asyncio.wait({exited, aborted}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        if exited in done:
            with contextlib.suppress(TimeoutError):  # a background child may still be writing
                await asyncio.wait_for(child.eof.wait(), DRAIN_AFTER_EXIT)
        else:
            stopped = "aborted" if aborted in done else "timeout"
    finally:
        for task in (exited, aborted):
            task.cancel()
        await asyncio.gather(exited, aborted, return_exceptions=True)
        code = await asyncio.shield(child.end())
        child.close()
    return (None, stopped) if stopped else (code, None)


def _format(out: _Output) -> tuple[str, dict[str, Any]]:
    full = out.text()
    stripped = full.rstrip("\n")
    total = out.newlines - (len(full) - len(stripped)) + 1
    trunc = truncate_tail(stripped)
    text = trunc.content if stripped else "(no output)"
    details: dict[str, Any] = {"truncation": {**trunc.as_details(), "total_lines": total}}
    if trunc.truncated:
        first = total - trunc.output_lines + 1
        where = f" {out.ensure_spill()}"
        limit = f"{format_size(MAX_BYTES)} limit" if trunc.truncated_by == "bytes" else f"{MAX_LINES} lines limit"
        text += f"\n\n[Showing lines {first}-{total} of {total} ({limit}).{where}]"
    if out.spill_path:
        details["full_output_path"] = out.spill_path
    return text, details


def bash_tool(ws: Workspace, *, timeout: float | None = DEFAULT_TIMEOUT) -> AgentTool:
    """The ``bash`` tool running in ``ws.root``.

    ``timeout`` (seconds; ``None`` = none) applies when the call gives none: agents left a hung
    command running for hours with pi, which has no default.
    """

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        command = req_str(args, "command", allow_empty=False)
        limit = opt_number(args, "timeout") or timeout
        out = _Output()
        try:
            code, stopped = await _run(command, ws.root, limit, signal, on_update, out)
        finally:
            out.close()
        text, details = _format(out)
        details["exit_code"] = code
        if stopped == "timeout":
            details["timed_out"] = True
            return AgentToolResult.text(
                f"{text}\n\nCommand timed out after {limit:g} seconds", details=details, is_error=True
            )
        if stopped == "aborted":
            details["aborted"] = True
            return AgentToolResult.text(f"{text}\n\nCommand aborted", details=details, is_error=True)
        assert code is not None
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return AgentToolResult.text(f"{text}\n\nCommand {why}", details=details, is_error=True)
        return AgentToolResult.text(text, details=details)

    return declare("bash", execute, description=bash_description(timeout))
