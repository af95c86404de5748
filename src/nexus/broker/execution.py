"""``BrokerExecution{stream, result}``: one message's run, live and awaited (seed 004 "Broker → NEX Interface").

``execution = await broker.execute(message, mode)`` accepts the message like ``send`` and
returns at once with

- ``execution.stream``, a :class:`BrokerStreamHandle`: the seed-004 ``StreamEvent``\\ s of the run
  that consumes the message (``stream_start``, ``token``, ``tool_status``, ``reasoning``,
  ``stream_end{final:false}`` between model calls, then ``stream_end{final:true}`` or
  ``stream_error{partial}``) — by callback (``on_event``) or as an async iterator
  (``async for event in execution.stream``); ``abort()``; ``is_streaming`` / ``is_compacting``;
- ``execution.result``, an awaitable of the run's :class:`~nexus.broker.runner.RunOutcome`
  (status, turn id, reply, error), resolved after the turn is written.

The run may start later (the agent is busy, the queue is in ``collect`` mode): events flow
when it starts. Events emitted before anyone subscribed are kept (up to
:data:`BACKLOG_LIMIT`) and replayed to the first subscriber, so a caller that subscribes right
after ``execute`` returns misses nothing. A message steered into the running turn follows
that turn from the moment it was handed over. A message that never runs (dropped from its
queue by its cap or ``clear_queue``) ends its stream with ``stream_error`` and its result
``failed`` with the reason. ``execute`` needs a runner that announces its
runs (``on_run``, as :class:`~nexus.broker.engine_runner.EngineRunner` does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from nexus.broker.engine_runner import EngineRunHandle
from nexus.broker.runner import RunHandle, RunOutcome, RunStatus
from nexus.broker.types import BrokerError, SendAndWaitResult, SendReceipt
from nexus.streaming.events import StreamEnd, StreamError, is_terminal
from nexus.streaming.from_engine import EngineEventMapper

if TYPE_CHECKING:
    from nexus.adapters.types import DeliveryTarget
    from nexus.ledger.broker_store import BrokerQueueItem
    from nexus.streaming.events import StreamEvent

log = logging.getLogger("nexus.broker")

BACKLOG_LIMIT = 4096
"""Events kept for a subscriber that has not come yet; past it the backlog is dropped (the run is not)."""

StreamListener = Callable[["StreamEvent"], object]


class AnnouncingRunner(Protocol):
    """A runner that tells listeners about every run as it starts (``EngineRunner.on_run``)."""

    def on_run(self, listener: Callable[[EngineRunHandle], object]) -> Callable[[], None]: ...


class BrokerStreamHandle:
    """The live side of one execution (seed 004 ``BrokerStreamHandle``): events, abort, state."""

    def __init__(self, run_id: str, session_label: str, target: DeliveryTarget) -> None:
        self.run_id = run_id
        self.session_label = session_label
        self.target = target
        self._listeners: list[StreamListener] = []
        self._backlog: list[StreamEvent] | None = []
        self._run: EngineRunHandle | None = None
        self._mapper: EngineEventMapper | None = None
        self._abort_reason: str | None = None
        self._abort_sent = False
        self._began = False
        self.ended = False

    # ---------------------------------------------------------------- for callers

    def on_event(self, listener: StreamListener) -> Callable[[], None]:
        """Call ``listener`` with every StreamEvent from now on (the first subscriber also gets the backlog).

        Returns a function that unsubscribes it. A listener that raises is logged and kept.
        """
        backlog, self._backlog = self._backlog or [], None
        for event in backlog:
            _call(listener, event)
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def events(self) -> AsyncIterator[StreamEvent]:
        """The events as an async iterator, subscribed *now*; it ends after the terminal event."""
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        if self.ended and self._backlog is None:
            queue.put_nowait(None)
        remove = self.on_event(queue.put_nowait)
        return _drain(queue, remove)

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self.events()

    def abort(self, reason: str = "aborted by the caller") -> None:
        """Stop the run: it is written ``aborted`` with what it produced.

        Before the run has started, it is aborted as soon as its turn starts (so the turn, with the
        message, is written ``aborted``: the message is consumed, not put back to run again).
        """
        self._abort_reason = reason
        if self._turn_started():
            self._send_abort()

    def _turn_started(self) -> bool:
        return self._run is not None and self._run.phase not in ("starting", "done")

    def _send_abort(self) -> None:
        if self._run is not None and self._abort_reason is not None and not self._abort_sent:
            self._abort_sent = True
            self._run.abort(self._abort_reason)

    @property
    def is_streaming(self) -> bool:
        """True while the run's model call streams (seed 004 ``isStreaming``)."""
        return self._run is not None and self._run.phase == "streaming"

    @property
    def is_compacting(self) -> bool:
        """True while the run compacts its context (seed 004 ``isCompacting``)."""
        return self._run is not None and self._run.phase == "compacting"

    @property
    def started(self) -> bool:
        """Whether the run's turn has begun (its first event arrived): from then on the message is consumed."""
        return self._began

    # ---------------------------------------------------------------- for the broker

    def attach(self, run: EngineRunHandle, backlog: list[object] = ()) -> None:  # type: ignore[assignment]
        """Follow ``run``'s engine events (``backlog``: those it emitted before it was matched)."""
        self._run = run
        self._mapper = EngineEventMapper(self.run_id, self.session_label, self.target)
        for event in backlog:
            self.engine_event(event)

    def engine_event(self, event: object) -> None:
        """One engine event of the attached run → its StreamEvents."""
        mapper = self._mapper
        if mapper is None or getattr(getattr(event, "event", event), "type", "") in ("lock_wait", "recovered"):
            return  # not the turn: the run still waits for its session
        self._began = True
        if self._abort_reason is not None and not self._abort_sent:
            self._send_abort()  # asked before the turn started: it has now
        for mapped in mapper.map(event):  # the mapper unwraps an enveloped event itself
            self._emit(mapped)

    def detach(self) -> None:
        """Forget a run that ended before its turn began (it gave the message back: a later run takes it)."""
        self._run = self._mapper = None

    def finish(self, outcome: RunOutcome) -> None:
        """The run ended: make sure the stream has its terminal event (a run that never started has none)."""
        if self.ended:
            return
        text_seen = self._mapper is not None and self._mapper.text_seen
        if outcome.status == "completed":
            self._emit(StreamEnd(self.run_id, final=True))
        else:
            self._emit(StreamError(outcome.error or f"the run ended {outcome.status}", text_seen))

    def _emit(self, event: StreamEvent) -> None:
        if self.ended:
            return
        if is_terminal(event):
            self.ended = True
        if not self._listeners:
            if self._backlog is not None:
                self._backlog.append(event)
                if len(self._backlog) > BACKLOG_LIMIT:
                    self._backlog = None
                    log.warning("run %s: nobody subscribed to its stream; its early events were dropped", self.run_id)
            return
        for listener in self._listeners if len(self._listeners) == 1 else list(self._listeners):
            try:
                listener(event)
            except Exception:  # one bad subscriber never breaks the run or the others
                log.exception("a stream listener failed")


def _call(listener: StreamListener, event: StreamEvent) -> None:
    try:
        listener(event)
    except Exception:  # one bad subscriber never breaks the run or the others
        log.exception("a stream listener failed")


async def _drain(queue: asyncio.Queue[StreamEvent | None], remove: Callable[[], None]) -> AsyncIterator[StreamEvent]:
    try:
        while (event := await queue.get()) is not None:
            yield event
            if is_terminal(event):
                return
    finally:
        remove()


@dataclass(slots=True)
class BrokerExecution:
    """One accepted message and the run that consumes it: ``stream`` (live) and ``result`` (awaitable)."""

    receipt: SendReceipt
    stream: BrokerStreamHandle
    result: asyncio.Future[RunOutcome]

    @property
    def session_label(self) -> str:
        return self.stream.session_label

    def __await__(self) -> Generator[Any, None, RunOutcome]:
        """``await execution`` is ``await execution.result``."""
        return self.result.__await__()


class _Matcher:
    """Finds the run that consumes one queue item among the runs a runner announces.

    It listens from before the message is sent (the item id is not known yet), holding the
    runs announced meanwhile with their events, so a run that starts before ``send`` returns
    is not missed; once the item is named, the match is attached and the others let go.
    """

    def __init__(
        self, stream: BrokerStreamHandle, result: asyncio.Future[RunOutcome], *, follow_later: bool = True
    ) -> None:
        self.stream = stream
        self.result = result
        self.follow_later = follow_later
        """Wait for a later run when the matched one gives the message back (False: one run only)."""
        self.item_id: str | None = None
        self.matched: EngineRunHandle | None = None
        self._held: list[tuple[EngineRunHandle, list[object]]] = []
        self._remove: Callable[[], None] = lambda: None
        self._tasks: set[asyncio.Task[None]] = set()

    def listen(self, runner: AnnouncingRunner) -> None:
        self._remove = runner.on_run(self.on_run)

    def on_run(self, run: EngineRunHandle) -> None:
        if self.result.done():
            return
        if self.item_id is None:
            buffer: list[object] = []
            self._held.append((run, buffer))
            run.on_event(lambda event: self._relay(run, buffer, event))
            return
        if self.item_id not in run.request.item_ids:
            return
        if self.matched is not None:
            if self.matched.phase != "done":
                return
            self.stream.detach()  # the run before gave the message back (its _settle may not have run yet)
        run.on_event(lambda event: self._relay(run, None, event))
        self._match(run, [])

    def _relay(self, run: EngineRunHandle, buffer: list[object] | None, event: object) -> None:
        if self.matched is run:
            self.stream.engine_event(event)
        elif buffer is not None and self.item_id is None:
            buffer.append(event)

    def name(self, item_id: str) -> None:
        """The item to look for (known once ``send`` returned)."""
        self.item_id = item_id
        held, self._held = self._held, []
        for run, buffer in held:
            if self.matched is None and item_id in run.request.item_ids:
                self._match(run, buffer)

    def follow_steered(self, run: EngineRunHandle, item_done: Callable[[str | None], bool]) -> None:
        """The message was handed to ``run`` (a steer): follow it; its result counts if the steer went in."""
        self.matched = run
        run.on_event(lambda event: self._relay(run, None, event))
        self.stream.attach(run)
        self._spawn(self._settle(run, item_done))

    def _match(self, run: EngineRunHandle, backlog: list[object]) -> None:
        self.matched = run
        self.stream.attach(run, backlog)
        self._spawn(self._settle(run, None))

    async def _settle(self, run: EngineRunHandle, item_done: Callable[[str | None], bool] | None) -> None:
        outcome = await run.result()
        if self.matched is not run:
            return  # superseded: a later run took the message
        if item_done is not None and not item_done(outcome.turn_id):
            self.matched = None  # the steer was handed back: it runs as a turn of its own later
            return
        if self.follow_later and not self.stream.started and outcome.turn_id is None and outcome.status == "aborted":
            self.matched = None  # aborted before its turn began: the broker queues the message again
            self.stream.detach()
            return
        self.stream.finish(outcome)
        self.close()
        if not self.result.done():
            self.result.set_result(outcome)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"execution:{self.stream.run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def settled_without_run(self, answer: SendAndWaitResult) -> None:
        """The broker finished the item and no run of it was followed (dropped, or failed before a run)."""
        if self.matched is None and not self.result.done():
            status: RunStatus = "completed" if answer.success else "failed"
            self.settle_now(RunOutcome(status, answer.turn_id, answer.reply or "", answer.error))

    def settle_now(self, outcome: RunOutcome) -> None:
        """End without a run (a duplicate message already finished, or one dropped from its queue)."""
        self.stream.finish(outcome)
        self.close()
        if not self.result.done():
            self.result.set_result(outcome)

    def close(self) -> None:
        self._held.clear()
        self._remove()


def run_execution(run: EngineRunHandle, target: DeliveryTarget) -> BrokerExecution:
    """The execution of a run announced by ``EngineRunner.on_run`` (call it from the hook: no event is missed).

    For hosts that learn of a run rather than send its message, e.g. the replies to inbound chat
    messages (``RunRequest`` carries their target). The receipt names the run's first queue item.
    """
    from nexus.ledger import new_ulid

    stream = BrokerStreamHandle(f"run-{new_ulid()}", run.request.session_label, target)
    result: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()
    matcher = _Matcher(stream, result, follow_later=False)
    item_id = run.request.item_ids[0] if run.request.item_ids else ""
    matcher.item_id = item_id
    run.on_event(lambda event: matcher._relay(run, None, event))
    matcher._match(run, [])
    return BrokerExecution(SendReceipt("", item_id), stream, result)


async def start_execution(
    send: Callable[[], Awaitable[SendReceipt]],
    runner: object,
    session_label: str,
    *,
    target: DeliveryTarget | None,
    current_run: Callable[[], RunHandle | None],
    get_item: Callable[[str], BrokerQueueItem | None],
    waiter: Callable[[str], asyncio.Future[SendAndWaitResult]],
) -> BrokerExecution:
    """Listen for runs, ``send()``, then follow the run that consumes the item (see ``AgentBroker.execute``)."""
    from nexus.adapters.types import DeliveryTarget
    from nexus.ledger import new_ulid

    if not callable(getattr(runner, "on_run", None)):
        raise BrokerError("this broker's runner does not announce its runs: execute() needs the engine runner")
    stream = BrokerStreamHandle(
        f"run-{new_ulid()}", session_label, target or DeliveryTarget("broker", "local", session_label)
    )
    result: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()
    matcher = _Matcher(stream, result)
    matcher.listen(runner)  # type: ignore[arg-type]
    try:
        receipt = await send()
    except BaseException:
        matcher.close()
        raise
    item_id = receipt.queue_item_id
    item = get_item(item_id) if receipt.duplicate else None
    if item is not None and item.status in ("delivered", "failed", "dropped"):
        matcher.settle_now(_finished_outcome(item))
        return BrokerExecution(receipt, stream, result)
    if not receipt.duplicate:  # told when the broker finishes the item, also without a run (dropped)
        waiter(item_id).add_done_callback(lambda done: matcher.settled_without_run(done.result()))
    matcher.name(item_id)
    run = current_run() if receipt.steered and matcher.matched is None else None
    if isinstance(run, EngineRunHandle):  # the running turn it was handed to

        def went_in(turn_id: str | None) -> bool:
            row = get_item(item_id)
            return row is not None and row.status == "delivered" and row.turn_id == turn_id

        matcher.follow_steered(run, went_in)
    return BrokerExecution(receipt, stream, result)


def _finished_outcome(item: BrokerQueueItem) -> RunOutcome:
    """The outcome of a duplicate message whose queue item already finished (from its stored row)."""
    if item.status == "delivered":
        return RunOutcome(status="completed", turn_id=item.turn_id)
    return RunOutcome(status="failed", turn_id=item.turn_id, error=item.error or f"the message was {item.status}")
