"""The event hub: one bounded, resumable log of ``StreamEvent``s per session, read by SSE subscribers.

``EventHub.publish(session_label, event_type, data)`` is what the broker calls for each seed-004
``StreamEvent`` (``stream_start``, ``token``, ``tool_status``, ``reasoning``, ``stream_end``,
``stream_error``); the hub knows nothing of those types beyond their names. Each event gets an id
from one hub-wide counter and is encoded as an SSE frame **once**, so fanning it out to many
subscribers costs a reference, not a copy.

Subscribers are cursors into the session's log, not queues: publishing appends and wakes the
waiting readers, and never waits for any of them, so a slow client cannot stall the broker. Each
reader sends what lies after its cursor in one write (at most ``MAX_BATCH`` events). Memory per
subscriber is bounded by that batch plus the server's transport buffer, because uvicorn waits for
a slow socket to drain before it accepts the next write. A client too slow to keep up falls behind
the retention window; it then gets one ``reset`` event (its cursor jumps to the newest event: reload
the session's history from the ledger) and continues live. Nothing is silently skipped.

Ids are integers that only grow: they start at the hub's start time in microseconds, so an id a
client kept from an earlier server process is below every id of this one and is answered with
``reset`` instead of being mistaken for a recent event. Within a session ids grow but are not
contiguous (the counter is shared by all sessions).

Retention (``[server]`` config): an event stays at least until it is ``retention_seconds`` old
(default 600 s) or the session holds more than ``retention_events`` (default 10,000) or
``retention_bytes`` (default 4 MiB) of newer events, or all sessions together hold more than
``retention_total_bytes`` (default 64 MiB; the oldest events of the process go first, whatever
their session): a busy server's memory is bounded, not only each session's. A ``Last-Event-ID``
resume inside that window replays exactly the events after it, with no loss and no duplicates.

``publish`` may be called from the event loop's thread or from any other thread (the wake-up then
hops onto the loop); it is cheap and synchronous.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_BATCH = 500
"""At most this many events go out in one write to one subscriber."""

HEARTBEAT = b": keepalive\n\n"
"""An SSE comment: proxies and load balancers see traffic and keep an idle stream open."""

_EVENT_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_SWEEP_EVERY = 1.0


class HubError(Exception):
    """A publish or subscribe the hub refuses (bad event type, too many subscribers, closed hub)."""


class HubFull(HubError):
    """Every subscriber slot is taken; the client should retry later."""


@dataclass(slots=True, frozen=True)
class HubEvent:
    """One published event: its id, type, publish time (``time.monotonic``) and encoded SSE frame."""

    id: int
    type: str
    at: float
    frame: bytes


@dataclass(slots=True)
class _Channel:
    """A session's retained events; every event of the session with an id <= ``floor`` is gone."""

    floor: int
    events: deque[HubEvent] = field(default_factory=deque)
    size: int = 0
    subscribers: int = 0
    wakeup: asyncio.Future[bool] | None = None


def encode_frame(event_id: int, event_type: str, payload: dict[str, Any]) -> bytes:
    """An SSE frame: ``id``, ``event`` (the type) and one ``data`` line of compact JSON."""
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event_id}\nevent: {event_type}\ndata: {data}\n\n".encode()


def _resolve(future: asyncio.Future[bool], tick: bool = False) -> None:
    if not future.done():
        future.set_result(tick)


class EventHub:
    """Per-session event logs with bounded retention, ``Last-Event-ID`` resume and many readers."""

    def __init__(
        self,
        *,
        retention_events: int = 10_000,
        retention_seconds: float = 600.0,
        retention_bytes: int = 4 * 1024 * 1024,
        retention_total_bytes: int = 64 * 1024 * 1024,
        heartbeat_seconds: float = 15.0,
        max_subscribers: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (
            min(retention_events, retention_bytes, retention_total_bytes) < 1
            or min(retention_seconds, heartbeat_seconds) <= 0
        ):
            raise ValueError("event hub limits must be positive")
        self.retention_events = retention_events
        self.retention_seconds = retention_seconds
        self.retention_bytes = retention_bytes
        self.retention_total_bytes = retention_total_bytes
        self.heartbeat_seconds = heartbeat_seconds
        self.max_subscribers = max_subscribers
        self._clock = clock
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._order: deque[tuple[_Channel, HubEvent]] = deque()
        """Every event in publish order (the oldest of the process first); entries of events a
        session's own limits already dropped are skipped, and compacted away when they pile up."""
        self._bytes = 0
        self._count = 0
        self._last_id = time.time_ns() // 1000
        self._first_id = self._last_id
        """The cursor of a reader that came before any event; an older id (an earlier process's) was never
        issued here (a ``reset`` says ``unknown``, not ``expired``)."""
        self._subscribers = 0
        self._closed = False
        self._last_sweep = clock()
        self._ticker: asyncio.TimerHandle | None = None

    @property
    def subscriber_count(self) -> int:
        """How many streams are open right now (all sessions)."""
        return self._subscribers

    @property
    def retained_bytes(self) -> int:
        """The encoded size of every retained event, all sessions together (at most ``retention_total_bytes``)."""
        return self._bytes

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran: no new subscribers, open streams end."""
        return self._closed

    def publish(self, session_label: str, event_type: str, data: dict[str, Any]) -> int:
        """Append one event to the session's log, wake its readers and return the event's id.

        The SSE ``data`` is ``{"type": event_type, **data}``, i.e. the ``StreamEvent`` itself.
        ``session_label`` is the session's own label (``Session.label``, not an alias): the events
        endpoint resolves aliases before it subscribes.
        """
        if not _EVENT_TYPE.fullmatch(event_type):
            raise HubError(f"event type {event_type!r} is not a name (letters, digits, '_', '.', '-')")
        if data.get("type", event_type) != event_type:
            raise HubError(f"data.type {data['type']!r} differs from the event type {event_type!r}")
        payload = {"type": event_type, **data}
        now = self._clock()
        with self._lock:
            self._last_id += 1
            event = HubEvent(self._last_id, event_type, now, encode_frame(self._last_id, event_type, payload))
            channel = self._channels.get(session_label)
            if channel is None:
                channel = self._channels[session_label] = _Channel(floor=self._last_id - 1)
            channel.events.append(event)
            channel.size += len(event.frame)
            self._order.append((channel, event))
            self._bytes += len(event.frame)
            self._count += 1
            self._trim(channel, now)
            self._trim_process()
            wakeup, channel.wakeup = channel.wakeup, None
            if now - self._last_sweep >= _SWEEP_EVERY:
                self._sweep(now)
        if wakeup is not None:
            self._wake(wakeup)
        return event.id

    def subscribe(self, session_label: str, last_event_id: int | None = None) -> Subscription:
        """A reader of the session's events after ``last_event_id`` (or from now, when it is None)."""
        with self._lock:
            if self._closed:
                raise HubError("the server is shutting down")
            if self._subscribers >= self.max_subscribers:
                raise HubFull(f"all {self.max_subscribers} event stream slots are taken; retry later")
            channel = self._channels.get(session_label)
            if channel is None:
                channel = self._channels[session_label] = _Channel(floor=self._last_id)
            self._trim(channel, self._clock())
            newest = channel.events[-1].id if channel.events else channel.floor
            channel.subscribers += 1
            self._subscribers += 1
        return Subscription(self, session_label, newest if last_event_id is None else last_event_id)

    def retained(self, session_label: str) -> list[HubEvent]:
        """The session's retained events, oldest first (a copy; for inspection and tests)."""
        with self._lock:
            channel = self._channels.get(session_label)
            return [] if channel is None else list(channel.events)

    def close(self) -> None:
        """End every open stream (at shutdown: SSE responses never end by themselves)."""
        with self._lock:
            self._closed = True
            wakeups = [c.wakeup for c in self._channels.values() if c.wakeup is not None]
            for channel in self._channels.values():
                channel.wakeup = None
        for wakeup in wakeups:
            self._wake(wakeup)

    # -- used by Subscription -------------------------------------------------------------------

    def _read(self, sub: Subscription) -> bytes:
        """The frames after ``sub``'s cursor (moving it), a ``reset`` frame if it fell out, or b""."""
        with self._lock:
            channel = self._channels[sub.session_label]
            newest = channel.events[-1].id if channel.events else channel.floor
            if sub.cursor == newest:
                return b""
            if sub.cursor < channel.floor or sub.cursor > newest:
                reset = self._reset_frame(sub.cursor, channel, newest)
                sub.cursor = newest
                return reset
            after: list[HubEvent] = []
            for event in reversed(channel.events):
                if event.id <= sub.cursor:
                    break
                after.append(event)
            batch = after[::-1][:MAX_BATCH]
            sub.cursor = batch[-1].id
            return b"".join(event.frame for event in batch)

    def _waiter(self, sub: Subscription) -> asyncio.Future[bool] | None:
        """The future the next publish (result False) or heartbeat tick (True) to ``sub``'s session
        resolves; None: there is something to read already."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                return None
            channel = self._channels[sub.session_label]
            newest = channel.events[-1].id if channel.events else channel.floor
            if sub.cursor != newest:
                return None
            if channel.wakeup is None:
                channel.wakeup = loop.create_future()
            if self._ticker is None:
                self._ticker = loop.call_later(self.heartbeat_seconds, self._tick)
            return channel.wakeup

    def _tick(self) -> None:
        """Every ``heartbeat_seconds`` while anyone listens: wake idle readers so they send a heartbeat.

        One timer for the whole hub instead of a timeout per reader: a reader then waits on the
        channel's shared future alone, which keeps fan-out to many readers cheap.
        """
        with self._lock:
            wakeups = [c.wakeup for c in self._channels.values() if c.wakeup is not None]
            for channel in self._channels.values():
                channel.wakeup = None
            running = not self._closed and self._subscribers > 0
            self._ticker = (
                asyncio.get_running_loop().call_later(self.heartbeat_seconds, self._tick) if running else None
            )
        for wakeup in wakeups:
            _resolve(wakeup, tick=True)

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            channel = self._channels.get(sub.session_label)
            self._subscribers -= 1
            if self._subscribers == 0 and self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None
            if channel is None:
                return
            channel.subscribers -= 1
            if channel.subscribers == 0 and not channel.events:
                del self._channels[sub.session_label]

    # -- internals (called with the lock held) ---------------------------------------------------

    def _trim(self, channel: _Channel, now: float) -> None:
        events, oldest_kept = channel.events, now - self.retention_seconds
        while events and (
            len(events) > self.retention_events or channel.size > self.retention_bytes or events[0].at < oldest_kept
        ):
            self._drop_oldest(channel)

    def _drop_oldest(self, channel: _Channel) -> None:
        dropped = channel.events.popleft()
        channel.size -= len(dropped.frame)
        channel.floor = dropped.id
        self._bytes -= len(dropped.frame)
        self._count -= 1

    def _trim_process(self) -> None:
        """Drop the process's oldest events until all sessions together fit ``retention_total_bytes``.

        A session's events are those with ids above its ``floor``, oldest first, and ``_order`` is
        in id order: so the first entry still above its channel's floor is that channel's oldest.
        """
        order = self._order
        while self._bytes > self.retention_total_bytes and order:
            channel, event = order.popleft()
            if event.id > channel.floor:
                self._drop_oldest(channel)
        if len(order) > 2 * self._count + 1024:  # entries of events the sessions' own limits dropped
            self._order = deque(entry for entry in order if entry[1].id > entry[0].floor)

    def _sweep(self, now: float) -> None:
        self._last_sweep = now
        for label in list(self._channels):
            channel = self._channels[label]
            self._trim(channel, now)
            if not channel.events and channel.subscribers == 0:
                del self._channels[label]

    def _reset_frame(self, cursor: int, channel: _Channel, newest: int) -> bytes:
        issued_here = self._first_id <= cursor <= newest
        reason = "expired" if issued_here and cursor < channel.floor else "unknown"
        message = (
            "events after this id are no longer retained"
            if reason == "expired"
            else "this id was not issued by this server process"
        )
        payload = {
            "type": "reset",
            "reason": reason,
            "last_event_id": cursor,
            "resume_id": newest,
            "message": f"{message}; reload the session's history, the stream continues live from here",
        }
        return encode_frame(newest, "reset", payload)

    @staticmethod
    def _wake(future: asyncio.Future[bool]) -> None:
        loop = future.get_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _resolve(future)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(_resolve, future)


class Subscription:
    """One reader's cursor into a session's log; :meth:`next` gives the bytes to send next.

    Readers wait on their session's one shared future: a publish resolves it once for all of them.
    """

    __slots__ = ("_done", "cursor", "hub", "session_label")

    def __init__(self, hub: EventHub, session_label: str, cursor: int) -> None:
        self.hub, self.session_label, self.cursor = hub, session_label, cursor
        self._done = False

    async def next(self) -> bytes | None:
        """The next frames, a heartbeat when the stream was idle for a heartbeat tick, or None at the end.

        The stream ends when the hub closes; a client's disconnect cancels the awaiting task.
        """
        while not self._done and not self.hub.closed:
            frames = self.hub._read(self)
            if frames:
                return frames
            waiter = self.hub._waiter(self)
            # shield: cancelling this reader (its client left) must not cancel the shared future
            if waiter is not None and await asyncio.shield(waiter):
                return HEARTBEAT
        self.close()
        return None

    def close(self) -> None:
        """Give the slot back (idempotent); the stream's ``finally`` calls it."""
        if not self._done:
            self._done = True
            self.hub._unsubscribe(self)
