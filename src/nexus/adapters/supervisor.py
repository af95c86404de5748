"""Supervision of long-running adapter processes (``stream``, ``monitor``).

A process that exits is restarted on next use, after a backoff of ``1 s x 2^n`` (capped at
300 s) where ``n`` counts restarts; after 5 restarts the adapter account is ``failed`` and
every use answers with an :class:`AdapterError` naming the last exit, until
:meth:`Supervisor.reset` clears it — for a ``stream`` process, ``nexus adapters enable`` does, from
any shell (:class:`~nexus.adapters._failures.StreamGiveUp`). A process that has run for
``stable_after_s`` without dying clears the count. Waits are on an injectable clock. The
process's stderr is passed on to ours within a budget (:mod:`nexus.adapters._stderr`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from nexus.adapters._failures import StreamGiveUp
from nexus.adapters._stderr import forward_stderr
from nexus.adapters.clock import Clock, MonotonicClock
from nexus.adapters.context import AdapterLaunch
from nexus.adapters.process import (
    PIPE_GRACE_S,
    STOP_GRACE_S,
    AdapterError,
    close_pipes,
    describe_spawn_error,
    end_group,
    exited,
    stop_process,
)

log = logging.getLogger("nexus.adapters")

SupervisorState: TypeAlias = Literal["idle", "running", "backoff", "failed", "stopped"]

STREAM_LINE_LIMIT = 1 << 20
"""Longest line read from an adapter's stdout; longer ones are logged and skipped."""


@dataclass(slots=True, frozen=True)
class RestartPolicy:
    """At most ``max_restarts`` restarts, ``base_s x 2^n`` apart, capped at ``cap_s`` (reference/nexus-specs.md §4)."""

    max_restarts: int = 5
    base_s: float = 1.0
    cap_s: float = 300.0
    stable_after_s: float = 600.0
    stop_grace_s: float = STOP_GRACE_S

    def backoff(self, restart: int) -> float:
        """Seconds to wait before restart number ``restart`` (0-based)."""
        return float(min(self.cap_s, self.base_s * (2**restart)))


class Supervisor:
    """Owns one adapter process at a time; ``ensure()`` starts or restarts it and returns it.

    ``prepare`` is called at every start (a fresh context, handed to that process only).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        prepare: Callable[[], AdapterLaunch],
        *,
        policy: RestartPolicy | None = None,
        clock: Clock | None = None,
        give_up: StreamGiveUp | None = None,
    ) -> None:
        self.name = name
        self.give_up = give_up  # where a give-up is written, and `nexus adapters enable` seen (stream processes)
        self.argv = list(argv)
        self.policy = policy or RestartPolicy()
        self.clock = clock or MonotonicClock()
        self._prepare = prepare
        self._launch: AdapterLaunch | None = None
        self._forwarders: set[asyncio.Task[None]] = set()  # one per process until its stderr ends
        self._watchers: set[asyncio.Task[None]] = set()  # one per process until it exits
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self.starts = 0
        self.state: SupervisorState = "idle"
        self.last_error: str | None = None
        self._started_at = 0.0
        self._lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def ensure(self) -> asyncio.subprocess.Process:
        """The running process, started (or restarted after its backoff) if needed."""
        async with self._lock:
            if self.proc is not None and self.proc.returncode is None:
                return self.proc
            if self.state == "stopped":
                raise AdapterError(f"{self.name}: stopped")
            if self.proc is not None:
                self._note_exit(self.proc.returncode)
            if self.starts > 0:
                await self._before_restart()
            return await self._start()

    def _note_exit(self, code: int | None) -> None:
        if self.clock.now() - self._started_at >= self.policy.stable_after_s:
            self.restarts = 0
        if self.last_error is None:
            self.last_error = f"exited with code {code}"
        self.proc = None
        self._release_env()

    async def _before_restart(self) -> None:
        if self.restarts >= self.policy.max_restarts and self._enabled_again():
            self.reset()  # fixed and enabled since the give-up: started at once, with a fresh count
            return
        if self.restarts >= self.policy.max_restarts:
            error = AdapterError(
                f"{self.name}: gave up after {self.policy.max_restarts} restarts (last: {self.last_error}); "
                "fix the adapter, then `nexus adapters enable` it again"
            )
            if self.state != "failed" and self.give_up is not None:
                self.give_up.note(str(error))
            self.state = "failed"
            raise error
        delay = self.policy.backoff(self.restarts)
        self.restarts += 1
        self.state = "backoff"
        log.warning(
            "%s: restarting in %.0f s (restart %d of %d)", self.name, delay, self.restarts, self.policy.max_restarts
        )
        await self.clock.sleep(delay)

    async def _start(self) -> asyncio.subprocess.Process:
        self.starts += 1
        launch = self._launch = self._prepare()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=launch.env,
                pass_fds=launch.pass_fds,
                limit=STREAM_LINE_LIMIT,
                start_new_session=True,
            )
        except OSError as exc:
            self._release_env()
            self.last_error = describe_spawn_error(self.argv, exc)
            self.state = "failed" if self.restarts >= self.policy.max_restarts else "backoff"
            raise AdapterError(f"{self.name}: {self.last_error}") from None
        launch.started()
        assert proc.stderr is not None
        forwarder = asyncio.create_task(forward_stderr(proc.stderr, self.name, self.clock), name=f"{self.name} stderr")
        self._forwarders.add(forwarder)
        forwarder.add_done_callback(self._forwarders.discard)
        watcher = asyncio.create_task(_end_with(proc, self.policy.stop_grace_s), name=f"{self.name} exit")
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        self.proc = proc
        self.state = "running"
        self.last_error = None
        self._started_at = self.clock.now()
        if self.give_up is not None:
            self.give_up.started()
        return proc

    def died(self, error: str) -> None:
        """Record why the process ended (called by its reader when stdout closes)."""
        self.last_error = error
        if self.state == "running":
            self.state = "backoff"

    def _enabled_again(self) -> bool:
        return self.state == "failed" and self.give_up is not None and self.give_up.cleared()

    def reset(self) -> None:
        """Clear the restart count and a ``failed`` state (the user fixed the adapter)."""
        self.restarts = 0
        if self.state == "failed":
            self.state = "idle"

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after the grace period; no restart afterwards."""
        self.state = "stopped"
        proc = self.proc
        if proc is not None:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
            await stop_process(proc, self.policy.stop_grace_s)
        self._release_env()
        for watcher in list(self._watchers):
            watcher.cancel()
        forwarders = list(self._forwarders)
        if (
            forwarders
        ):  # what the process wrote before it ended is still passed on; a grandchild's pipe is not waited for
            _, pending = await asyncio.wait(forwarders, timeout=1.0)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def kill_for_restart(self) -> None:
        """Stop a misbehaving process so the next use restarts it (counted as a restart)."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            await stop_process(proc, self.policy.stop_grace_s)

    def _release_env(self) -> None:
        if self._launch is not None:
            self._launch.release()
        self._launch = None


async def _end_with(proc: asyncio.subprocess.Process, grace: float) -> None:
    """When the adapter exits, end what it left running, so that its readers reach the end of its output.

    A child left in its process group (``cmd &``) holds its stdout: the reader would wait for
    the end of a pipe the child keeps open, and the exit would go unnoticed (a delivery waiting
    for its finish timeout, a monitor never restarted). One in a session of its own cannot be
    signalled: the pipes are closed after :data:`~nexus.adapters.process.PIPE_GRACE_S`.
    """
    await exited(proc)
    await end_group(proc, min(grace, PIPE_GRACE_S))
    stdout = proc.stdout
    deadline = asyncio.get_running_loop().time() + PIPE_GRACE_S
    while stdout is not None and not stdout.at_eof() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)  # the reader owns the stream: the end can be watched, not awaited
    close_pipes(proc)
