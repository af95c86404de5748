"""Running adapter executables: one-shot commands (``info``, ``send``, ``health``) and stopping processes.

An adapter is a foreign program, so every way it can misbehave ends in an
:class:`AdapterError` with one line saying what happened: missing or not executable, a
timeout (it is killed), too much output (killed), a non-zero exit (with the last line it
wrote on stderr), output that is not JSON. Nothing here raises anything else.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nexus.adapters.types import said
from nexus.errors import NexusError

MAX_OUTPUT_BYTES = 1 << 20
"""A one-shot command that prints more than this is killed (an adapter flooding stdout)."""

STOP_GRACE_S = 5.0
"""Seconds between SIGTERM and SIGKILL when stopping an adapter process."""

PIPE_GRACE_S = 1.0
"""After an adapter exited, how long its output may take to reach its end before it is cut off
(a child in a session of its own, out of reach of the group's signals, may hold the pipe)."""

EXIT_POLL_S = 0.05


class AdapterError(NexusError):
    """An adapter could not be run or misbehaved; the message says which adapter and what to do."""


@dataclass(slots=True, frozen=True)
class CommandOutput:
    """What a finished one-shot command produced."""

    stdout: bytes
    stderr_tail: str
    returncode: int


def describe_spawn_error(argv: Sequence[str], exc: OSError) -> str:
    """One line for a process that could not start."""
    program = argv[0] if argv else "(empty command)"
    if isinstance(exc, FileNotFoundError):
        return f"adapter executable {program!r} not found: check the command in nexus.toml"
    if isinstance(exc, PermissionError):
        return f"adapter executable {program!r} is not executable: chmod +x it"
    return f"adapter executable {program!r} could not start: {exc.strerror or exc}"


async def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout_s: float,
    name: str,
    max_output: int = MAX_OUTPUT_BYTES,
    pass_fds: Sequence[int] = (),
) -> CommandOutput:
    """Run ``argv`` to completion with a deadline and an output cap; raises :class:`AdapterError`.

    ``pass_fds`` are inherited by this process only (its context, see :mod:`nexus.adapters.context`).
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            pass_fds=tuple(pass_fds),
            start_new_session=True,
        )
    except OSError as exc:
        raise AdapterError(f"{name}: {describe_spawn_error(argv, exc)}") from None
    except ValueError:  # Popen's "embedded null byte": an argument no command line can carry
        raise AdapterError(f"{name}: an argument holds a NUL character, which no command line can carry") from None
    assert proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.ensure_future(_tail(proc.stderr))
    stdout = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            await _output_until_exit(proc, proc.stdout, stdout, max_output)
    except TimeoutError:
        stderr_task.cancel()
        await stop_process(proc, grace=0.5)
        raise AdapterError(f"{name}: no answer within {timeout_s:g} s (the adapter hangs); it was killed") from None
    except _Flood:
        stderr_task.cancel()
        await stop_process(proc, grace=0.5)
        raise AdapterError(f"{name}: printed more than {max_output} bytes (flooding stdout); it was killed") from None
    finally:
        if proc.returncode is None:
            await stop_process(proc, grace=0.5)
    try:  # a grandchild may still hold stderr open: do not wait for it long
        stderr_tail = await asyncio.wait_for(stderr_task, PIPE_GRACE_S)
    except TimeoutError:
        stderr_tail = ""
    return CommandOutput(bytes(stdout), stderr_tail, proc.returncode if proc.returncode is not None else -1)


async def _output_until_exit(
    proc: asyncio.subprocess.Process, stream: asyncio.StreamReader, into: bytearray, limit: int
) -> None:
    """Read ``stream`` into ``into`` until it ends and the process exits; the exit is what counts.

    A child the adapter left running (``cmd &``) may hold its stdout open for as long as it
    lives: once the adapter has exited, what is left of its process group is ended, and what
    the pipe still brings within :data:`PIPE_GRACE_S` is its answer.
    """
    reading = asyncio.ensure_future(_read_capped(stream, limit, into))
    exit_code = asyncio.ensure_future(exited(proc))
    try:
        await asyncio.wait({reading, exit_code}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():
            await end_group(proc)
            await asyncio.wait({reading}, timeout=PIPE_GRACE_S)
        if reading.done():
            reading.result()  # _Flood
        await exit_code
    finally:
        reading.cancel()
        exit_code.cancel()


async def exited(proc: asyncio.subprocess.Process) -> int:
    """The exit code, as soon as the process has exited.

    Not ``proc.wait()``: it also waits until no process holds the pipes any more, and a child
    the adapter left running would keep it waiting as long as the child lives.
    """
    while proc.returncode is None:  # noqa: ASYNC110 - set by the loop's child watcher, which offers nothing to await
        await asyncio.sleep(EXIT_POLL_S)
    return proc.returncode


async def end_group(proc: asyncio.subprocess.Process, grace: float = PIPE_GRACE_S) -> None:
    """End what is left of an exited adapter's process group: SIGTERM, then SIGKILL after ``grace``.

    Its children hold its pipes and the descriptor of its context (with the credential); a
    supervised adapter is started afresh, never continued by what it left behind.
    """
    if not _signal(proc, signal.SIGTERM):
        return
    deadline = asyncio.get_running_loop().time() + grace
    while _signal(proc, 0):
        if asyncio.get_running_loop().time() >= deadline:
            _signal(proc, signal.SIGKILL)
            return
        await asyncio.sleep(EXIT_POLL_S)


class _Flood(Exception):
    pass


async def _read_capped(stream: asyncio.StreamReader, limit: int, into: bytearray) -> None:
    """Append ``stream`` to ``into`` until it ends (``into`` keeps what came if this is cancelled)."""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        if len(into) + len(chunk) > limit:
            raise _Flood
        into += chunk


async def _tail(stream: asyncio.StreamReader, keep: int = 4096) -> str:
    data = b""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        data = (data + chunk)[-keep:]
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def parse_json_output(output: CommandOutput, *, name: str, command: str) -> object:
    """The JSON value a one-shot command printed (its last non-empty line); :class:`AdapterError` otherwise."""
    if output.returncode != 0:
        detail = f": {said(output.stderr_tail)}" if output.stderr_tail else ""
        parsed = _last_json(output.stdout)
        if isinstance(parsed, dict) and command in ("send", "health"):
            return parsed  # a DeliveryResult or HealthReport describing the failure is still an answer
        # an `info` that failed is no registration, whatever it printed
        raise AdapterError(f"{name}: `{command}` exited with code {output.returncode}{detail}")
    parsed = _last_json(output.stdout)
    if parsed is _NOTHING:
        raw = output.stdout.decode("utf-8", "replace").strip().splitlines()
        sample = said(raw[-1])[:80] if raw else "nothing"
        raise AdapterError(f"{name}: `{command}` did not print JSON (got {sample!r}); see docs/adapters.md")
    return parsed


_NOTHING = object()


def _last_json(stdout: bytes) -> object:
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return _NOTHING
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):
        if line.strip():
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return _NOTHING
    return _NOTHING


async def stop_process(proc: asyncio.subprocess.Process, grace: float = STOP_GRACE_S) -> int | None:
    """SIGTERM the process (its whole session), wait ``grace`` seconds, then SIGKILL; returns the exit code."""
    if proc.returncode is None:
        _signal(proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(exited(proc), grace)
        except TimeoutError:
            _signal(proc, signal.SIGKILL)
            await exited(proc)
    try:
        await end_group(proc, min(grace, PIPE_GRACE_S))  # its children, holding its pipes
    finally:
        close_pipes(proc)
    return proc.returncode


def close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close the process's pipes now: left to the garbage collector, an unread stdout pipe is closed
    on whatever event loop runs then (or a closed one, which raises "Event loop is closed")."""
    transport = getattr(proc, "_transport", None)
    if transport is not None and not transport.is_closing():
        transport.close()


def _signal(proc: asyncio.subprocess.Process, sig: int) -> bool:
    """Signal the adapter's process group (it leads one: ``start_new_session``), children included.

    Not ``proc.send_signal``: Popen polls (reaps) the child first, stealing its exit status
    from asyncio's child watcher ("Unknown child process pid ..."). False when no process of
    the group is left (signal 0 only asks).
    """
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
