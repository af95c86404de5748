"""The native path's process side: one long-running ``stream`` process per adapter account.

Deliveries to one process take turns (FIFO): the protocol's token lines carry no delivery id,
so two deliveries interleaved on one stdin could not be told apart. The router buffers a
waiting delivery's events meanwhile, so no run ever waits on an adapter. A reader task per
process parses the ``AdapterStreamStatus`` lines and hands them to the current delivery;
a malformed or unexpected line is logged and skipped. When the process dies, the current
delivery ends with the exit as its error and the supervisor restarts the process (with its
backoff) for the next one. A process that stops reading its stdin is killed once a write has
waited ``timeout_s`` (the pipe and our buffer full), so it can never hold its account's
deliveries behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from nexus.adapters._lines import read_line, worth_logging
from nexus.adapters.supervisor import Supervisor
from nexus.adapters.types import AdapterStreamStatus, ProtocolError

log = logging.getLogger("nexus.adapters")

_DRAIN_ABOVE = 256 * 1024


@dataclass(slots=True)
class StreamDelivery:
    """One delivery on a stream process: write lines, then wait for ``delivery_complete``."""

    proc: asyncio.subprocess.Process
    supervisor: Supervisor
    message_ids: list[str] = field(default_factory=list)
    statuses: int = 0
    shown: bool = False
    error: str | None = None
    dead: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def write(self, data: bytes) -> bool:
        """Queue ``data`` for the adapter's stdin; False once the process is gone."""
        stdin = self.proc.stdin
        if self.dead or stdin is None or stdin.is_closing():
            self.dead = True
            return False
        stdin.write(data)
        return True

    async def drain(self, timeout_s: float) -> bool:
        """Wait while the pipe is full (backpressure), at most ``timeout_s``; False if the process is gone.

        A process that has not read for ``timeout_s`` is stuck: it is killed (the supervisor
        restarts it for the next delivery) and this delivery fails.
        """
        stdin = self.proc.stdin
        if stdin is None or self.dead:
            return False
        waiting = stdin.transport.get_write_buffer_size()
        if waiting > _DRAIN_ABOVE:
            try:
                await asyncio.wait_for(stdin.drain(), timeout_s)
            except TimeoutError:
                self.fail(
                    f"{self.supervisor.name}: the adapter stopped reading its stdin ({waiting} bytes waited "
                    f"{timeout_s:g} s); it was killed and restarts for the next delivery"
                )
                await self.supervisor.kill_for_restart()
                return False
            except (ConnectionError, BrokenPipeError):
                self.dead = True
                return False
        return True

    def on_status(self, status: AdapterStreamStatus) -> None:
        self.statuses += 1
        if status.type in ("message_created", "message_updated", "message_sent"):
            self.shown = True
            if status.message_id is not None and status.message_id not in self.message_ids:
                self.message_ids.append(status.message_id)
        elif status.type == "delivery_complete":
            for mid in status.message_ids:
                if mid not in self.message_ids:
                    self.message_ids.append(mid)
            self.done.set()
        elif status.type == "delivery_error":
            self.error = status.error or "delivery_error"
            self.done.set()

    def fail(self, error: str) -> None:
        self.dead = True
        if self.error is None:
            self.error = error
        self.done.set()


class StreamProcess:
    """The ``stream --account ID --format jsonl`` process of one adapter account, shared by its deliveries."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self._turn = asyncio.Lock()
        self._current: StreamDelivery | None = None
        self._reader: asyncio.Task[None] | None = None
        self._reader_proc: asyncio.subprocess.Process | None = None
        self.bad_lines = 0
        self.deliveries = 0

    @property
    def current(self) -> StreamDelivery | None:
        """The delivery this process is writing now, if any (what it has shown so far, for health and tests)."""
        return self._current

    @contextlib.asynccontextmanager
    async def delivery(self) -> AsyncIterator[StreamDelivery]:
        """Wait for this process's turn, (re)start it if needed, and yield the delivery."""
        async with self._turn:
            proc = await self.supervisor.ensure()
            if self._reader_proc is not proc:
                self._reader_proc = proc
                self._reader = asyncio.create_task(self._read(proc), name=f"nexus-adapter-{self.supervisor.name}")
            current = StreamDelivery(proc, self.supervisor)
            if proc.returncode is not None:
                current.fail(f"stream process exited with code {proc.returncode}")
            self._current = current
            self.deliveries += 1
            try:
                yield current
            finally:
                self._current = None

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        stdout = proc.stdout
        while True:
            try:
                line = await read_line(stdout)
            except (ConnectionError, OSError):
                line = b""
            if line is None:
                self._bad("a line longer than 1 MiB (skipped whole)")
                continue
            if not line:
                break
            self._line(line)
        code = await proc.wait()
        stopped = self.supervisor.state == "stopped"  # we stopped it (shutdown): not a failure
        error = "the adapter was stopped" if stopped else f"stream process exited with code {code}"
        if not stopped:
            self.supervisor.died(error)
        current = self._current
        if current is not None and current.proc is proc and not current.done.is_set():
            current.fail(f"{error} in the middle of a delivery")
        if not stopped:
            log.warning("%s: %s", self.supervisor.name, error)

    def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            status = AdapterStreamStatus.from_json(json.loads(line))
        except (ValueError, ProtocolError) as exc:
            self._bad(f"{exc}: {line[:120]!r}")
            return
        current = self._current
        if current is None:
            self._bad(f"status line outside a delivery: {line[:120]!r}")
            return
        current.on_status(status)

    def _bad(self, what: str) -> None:
        self.bad_lines += 1
        if worth_logging(self.bad_lines):
            log.warning(
                "%s: skipped a malformed line from the adapter (%d so far): %s",
                self.supervisor.name,
                self.bad_lines,
                what,
            )

    async def close(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and its reader."""
        await self.supervisor.stop()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 5)
