"""Event streams across processes: every run's StreamEvents go through the ledger's ``run_events`` log.

On a PostgreSQL ledger several ``nexus serve`` processes share the sessions: a message accepted by one
runs on whichever claims it, and an SSE client may be connected to any of them (and reconnect to
another). So on PostgreSQL no process numbers events itself. :meth:`EventRelay.publish` (what
:class:`~nexus.server._live.LiveRuns` calls for each event) buffers; every ``flush_s`` (20 ms) the buffer
goes to the database in one transaction, which hands out the ids and sends one ``NOTIFY nexus_events``.
Every process tails the log (woken by the notification, or by a jittered poll when a notification was
lost) and publishes what it reads into its own :class:`EventHub` under the log's ids. The same event has
the same id on every process, so ``Last-Event-ID`` resumes anywhere: what the hub still holds comes from
memory, older events from the log (:meth:`EventRelay.subscribe`), and an id below what the log keeps is
answered with a ``reset`` (reason ``expired``), as on one process.

The log is bounded: every ``TRIM_EVERY_S`` each process drops the events older than the hub's retention
(``[server] events_retention_seconds``) and all but the newest ``keep_rows``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from nexus.server._event_hub import EventHub, Subscription, event_json, event_payload, stored_frame

if TYPE_CHECKING:
    from nexus.ledger import RunEventLog

log = logging.getLogger("nexus.server")

FLUSH_S = 0.02
"""Events wait this long for company before they are written: one transaction per batch, not per token."""

POLL_S = 1.0
"""The tail looks at the log at least this often (jittered), in case a notification was lost."""

TRIM_EVERY_S = 30.0
READ_BATCH = 1000
RESUME_LIMIT = 5000
"""A resume replays at most this many of the session's events from the log (then ``reset``)."""

MAX_BUFFER = 100_000
"""Events waiting for the database at most (it is down): the oldest beyond are dropped, with a warning."""


class EventRelay:
    """Writes this process's StreamEvents to ``run_events`` in batches and feeds every process's hub from it."""

    def __init__(
        self, hub: EventHub, events: RunEventLog, *, keep_rows: int = 100_000, flush_s: float = FLUSH_S
    ) -> None:
        self.hub, self.events = hub, events
        self.keep_rows, self.flush_s = keep_rows, flush_s
        self._buffer: list[tuple[str, str, str]] = []
        self._pending = asyncio.Event()
        self._look = asyncio.Event()
        self._pulling = asyncio.Lock()
        self._cursor = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.written = 0
        """Events this process wrote, and in how many transactions (``batches``): for tests and bench/."""
        self.batches = 0

    async def start(self) -> None:
        """Take ids from the log's newest on, and start writing, tailing and trimming."""
        _, newest = await self.events.bounds()
        self._cursor = newest
        self.hub.start_ids_at(newest, shared=True)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(job(), name=f"event-relay:{job.__name__}")
                       for job in (self._write_loop, self._tail_loop, self._poll_loop, self._trim_loop)]  # fmt: skip
        listener = self.events.listener()
        if listener is not None:
            self._tasks.append(loop.create_task(listener.listen(lambda _: self._look.set()), name="event-relay:listen"))

    def publish(self, session_label: str, event_type: str, data: dict[str, Any]) -> None:
        """Queue one event for the next batch (on the event loop's thread; never waits)."""
        payload = event_json(event_payload(event_type, data))
        self._buffer.append((session_label, event_type, payload))
        if len(self._buffer) > MAX_BUFFER:
            del self._buffer[: len(self._buffer) - MAX_BUFFER]
            log.warning("run events wait for the database: dropped the oldest beyond %d", MAX_BUFFER)
        self._pending.set()

    async def subscribe(self, session_label: str, last_event_id: int | None) -> Subscription:
        """A reader of the session after ``last_event_id``: the log's events the hub no longer holds first."""
        if last_event_id is not None and last_event_id > self.hub.last_id:
            await self._pull()  # an id another process's hub showed, not read here yet
        subscription = self.hub.subscribe(session_label, last_event_id)
        if last_event_id is None:
            return subscription
        floor = self.hub.floor(session_label)
        if last_event_id >= floor:
            return subscription
        try:
            trimmed, older = await self.events.resume(session_label, last_event_id, floor, RESUME_LIMIT)
        except BaseException:
            subscription.close()
            raise
        if last_event_id < trimmed:  # some were trimmed: the hub answers reset (expired)
            return subscription
        frames = b"".join(stored_frame(e.id, e.event_type, e.payload) for e in older)
        subscription.prepend(frames, floor if len(older) < RESUME_LIMIT else older[-1].id)
        return subscription

    async def close(self) -> None:
        """Write what is buffered and read it back into the hub, then stop (at shutdown, after the runs ended)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if tasks:
            try:
                await self._write()
                await self._pull()
            except Exception as exc:
                log.warning("the last run events were not written (%s)", exc)

    # -- the loops -------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            await self._pending.wait()
            await asyncio.sleep(self.flush_s)  # let the batch fill: one transaction per flush, not per token
            try:
                await self._write()
            except Exception as exc:  # the database is unreachable past its own retries: keep them, try again
                log.warning("could not write run events (%s); retrying in 1 s", exc)
                await asyncio.sleep(1.0)

    async def _write(self) -> None:
        rows, self._buffer = self._buffer, []
        self._pending.clear()
        if not rows:
            return
        from nexus.ledger import LedgerBusyError

        try:
            await self.events.append(rows)
        except (LedgerBusyError, asyncio.CancelledError):  # unreachable or busy past its retries: kept, tried again
            self._buffer[:0] = rows  # in order, before what came meanwhile
            self._pending.set()
            raise
        except Exception as exc:  # refused (a bug, not the weather): dropped, or it would block every later event
            log.error("run events dropped: the database refused %d of them (%s)", len(rows), exc)
            return
        self.written += len(rows)
        self.batches += 1
        self._look.set()  # our own events: read them now, the notification is for the others

    async def _tail_loop(self) -> None:
        while True:
            await self._look.wait()
            self._look.clear()
            try:
                await self._pull()
            except Exception as exc:
                log.warning("could not read run events (%s); the next look retries", exc)

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(POLL_S * random.uniform(0.5, 1.5))
            self._look.set()

    async def _trim_loop(self) -> None:
        while True:
            await asyncio.sleep(TRIM_EVERY_S * random.uniform(0.5, 1.5))
            cutoff = int((time.time() - self.hub.retention_seconds) * 1000)
            try:
                await self.events.trim(cutoff, self.keep_rows)
            except Exception as exc:
                log.warning("could not trim run events (%s)", exc)

    async def _pull(self) -> None:
        """Publish every event after the cursor into the hub, in id order."""
        async with self._pulling:
            while True:
                batch = await self.events.after(self._cursor, READ_BATCH)
                for event in batch:
                    self.hub.publish_stored(event.id, event.session_label, event.event_type, event.payload)
                if batch:
                    self._cursor = batch[-1].id
                if len(batch) < READ_BATCH:
                    return
