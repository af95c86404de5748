"""One event channel per execution: typed events in an envelope, bounded non-blocking subscribers.

Everything a run reports goes through its :class:`EventChannel` — the agent loop's events
(message and tool lifecycle), the engine's own (retries, fallback, compaction), and the
run-level events defined here (start, state changes, reply/reasoning deltas, steer receipts,
end). Each is wrapped in an :class:`ExecutionEvent` envelope ``{run_id, session_label,
agent_id, seq, ts}``. The seed-000 callbacks (:mod:`nexus.engine.execution.callbacks`), the CLI renderer
and the streaming bridge are all mappings of this one stream.

Subscribers never stall a run: each gets a :class:`Subscription` with a bounded buffer. When a
subscriber falls behind, consecutive reply/reasoning deltas of one message are coalesced into
one (no text is lost), progress events (partial message updates, tool progress) are dropped
once the buffer is full, and lifecycle events are always kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.agent import SteerReceipt
    from nexus.engine.types import AgentResult

log = logging.getLogger("nexus.engine")

ExecutionState: TypeAlias = Literal["starting", "streaming", "tools", "compacting", "finishing", "done"]
"""Where a run is: waiting/assembling, a model call streaming, tools running, compacting, writing, ended."""


@dataclass(slots=True, frozen=True)
class LockWaitEvent:
    """Another run of the session holds its lock (in this process or another): this one waits for it."""

    type: Literal["lock_wait"] = "lock_wait"


@dataclass(slots=True, frozen=True)
class RecoveredEvent:
    """Open turns of the session were closed before this run read its head (a killed run's, or this
    process's own whose final write failed earlier: ``rescued``)."""

    turn_ids: tuple[str, ...]
    rescued: tuple[str, ...] = ()
    type: Literal["recovered"] = "recovered"


@dataclass(slots=True, frozen=True)
class RunStartEvent:
    """The run began: its turn is open in the ledger as ``turn_id`` (when it has one), on ``parent_turn_id``
    (``None``: the run starts the session's conversation)."""

    turn_id: str | None
    parent_turn_id: str | None = None
    type: Literal["run_start"] = "run_start"


@dataclass(slots=True, frozen=True)
class StateEvent:
    """``Execution.state`` changed from ``previous`` to ``state``."""

    state: ExecutionState
    previous: ExecutionState
    type: Literal["state"] = "state"


@dataclass(slots=True, frozen=True)
class ReplyDelta:
    """More reply text of the assistant message at turn index ``message_index`` (may be coalesced)."""

    delta: str
    message_index: int
    type: Literal["reply_delta"] = "reply_delta"


@dataclass(slots=True, frozen=True)
class ReasoningDelta:
    """More extended-thinking text of the assistant message at ``message_index`` (may be coalesced)."""

    delta: str
    message_index: int
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(slots=True, frozen=True)
class SteerEvent:
    """A steering message was settled: ``receipt.status`` is ``delivered`` or ``returned``."""

    receipt: SteerReceipt
    type: Literal["steer"] = "steer"


@dataclass(slots=True, frozen=True)
class RunEndEvent:
    """The run ended and its turn is written; ``partial`` when it failed after some reply text arrived."""

    result: AgentResult
    partial: bool = False
    type: Literal["run_end"] = "run_end"


RunEvent: TypeAlias = (
    LockWaitEvent | RecoveredEvent | RunStartEvent | StateEvent | ReplyDelta | ReasoningDelta | SteerEvent | RunEndEvent
)
"""The run-level events; the channel also carries agent-loop events and engine events."""

_COALESCE = frozenset(("reply_delta", "reasoning_delta"))
_DROPPABLE = frozenset(("message_update", "tool_execution_update"))


@dataclass(slots=True, frozen=True)
class ExecutionEvent:
    """One event of one run in its envelope; ``seq`` counts from 1 per run, ``ts`` is Unix ms."""

    run_id: str
    session_label: str
    agent_id: str
    seq: int
    ts: int
    event: Any

    @property
    def type(self) -> str:
        """The wrapped event's ``type`` tag (``run_start``, ``reply_delta``, ``tool_execution_end`` …)."""
        return str(self.event.type)


class Subscription:
    """A bounded, non-blocking view of a channel: ``async for item in subscription`` until the run ends.

    See the module docstring for what happens when it falls behind; ``dropped`` counts the
    progress events it lost.
    """

    __slots__ = ("_closed", "_items", "_waiter", "dropped", "maxsize")

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = max(1, maxsize)
        self._items: deque[ExecutionEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self.dropped = 0

    def push(self, item: ExecutionEvent) -> None:
        """Buffer ``item`` (coalescing or dropping as described); never blocks."""
        kind = item.event.type
        items = self._items
        if kind in _COALESCE and items:
            tail = items[-1]
            if tail.event.type == kind and tail.event.message_index == item.event.message_index:
                merged = replace(tail.event, delta=tail.event.delta + item.event.delta)
                items[-1] = replace(item, event=merged)
                return
        if kind in _DROPPABLE and len(items) >= self.maxsize:
            self.dropped += 1
            return
        items.append(item)
        self._wake()

    def close(self) -> None:
        """No more items will come (the run ended); iteration ends once the buffer is drained."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> ExecutionEvent:
        while not self._items:
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    async def next(self, timeout_s: float) -> ExecutionEvent | None:
        """The next item, or ``None`` when none came within ``timeout_s`` (a caller's heartbeat);
        ``StopAsyncIteration`` once the run has ended and every item was taken."""
        if not self._items and not self._closed:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._waiter, timeout_s)
            except TimeoutError:
                return None
            finally:
                self._waiter = None
        return await self.__anext__()

    def __len__(self) -> int:
        return len(self._items)


Listener: TypeAlias = Callable[[ExecutionEvent], object]


class EventChannel:
    """The one event stream of a run: sequence numbers, envelopes, listeners and subscriptions.

    Envelopes are only built while someone listens, so an unwatched run pays one counter
    increment per event.
    """

    __slots__ = ("_listeners", "_subscriptions", "agent_id", "closed", "run_id", "seq", "session_label")

    def __init__(self, run_id: str, session_label: str, agent_id: str = "") -> None:
        self.run_id = run_id
        self.session_label = session_label
        self.agent_id = agent_id
        self.seq = 0
        self.closed = False
        # tuples, replaced when one comes or goes: most runs have no watcher, and two empty lists were 112 bytes
        # of every run in flight
        self._listeners: tuple[Listener, ...] = ()
        self._subscriptions: tuple[Subscription, ...] = ()

    @property
    def watched(self) -> bool:
        """True while a listener or subscription exists."""
        return bool(self._listeners or self._subscriptions)

    def publish(self, event: Any) -> None:
        """Number ``event`` and hand it to every listener (errors logged) and subscription."""
        self.seq += 1
        if not (self._listeners or self._subscriptions):
            return
        item = ExecutionEvent(
            self.run_id, self.session_label, self.agent_id, self.seq, time.time_ns() // 1_000_000, event
        )
        for listener in self._listeners:  # a listener removed meanwhile still hears this one
            try:
                listener(item)
            except Exception:  # a broken listener must not break the run
                log.exception("event listener raised on %s; the run continues", item.type)
        for subscription in self._subscriptions:
            subscription.push(item)

    def publish_new(self, kind: Callable[..., object], *args: object) -> None:
        """``publish(kind(*args))``, the event built only when someone listens (else only counted, as
        :meth:`publish` would): a broker's runs usually have no listener, and each frozen event cost ~1 us."""
        if self._listeners or self._subscriptions:
            self.publish(kind(*args))
        else:
            self.seq += 1

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (quickly, on the event loop) with every event from now on; returns an unsubscribe."""
        self._listeners += (listener,)

        def remove() -> None:
            listeners = self._listeners
            if listener in listeners:
                i = listeners.index(listener)
                self._listeners = listeners[:i] + listeners[i + 1 :]

        return remove

    def subscribe(self, maxsize: int = 256) -> Subscription:
        """A new :class:`Subscription` (already closed if the run has ended)."""
        subscription = Subscription(maxsize)
        if self.closed:
            subscription.close()
        else:
            self._subscriptions += (subscription,)
        return subscription

    def close(self) -> None:
        """The run ended: every subscription ends after its buffered items."""
        self.closed = True
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions = ()
        self._listeners = ()
