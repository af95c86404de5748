"""What a start of a run carries: the options of ``Runtime.start``, the request its task gets, the result of a
start that never ran (aborted while another run of the session held its lock, or its messages answered by a turn
the lock recovered), and the admission of a start's first step to the event loop (:func:`admitted`)."""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from nexus._dataclass import dataclass
from nexus._per_loop import per_loop
from nexus.agent import AgentTool
from nexus.engine.assembly.context import EventContext
from nexus.engine.types import AgentResult, AgentSpec
from nexus.llm import AbortSignal, ImageContent, UserMessage

if TYPE_CHECKING:  # StartOptions types ``**options`` only: at run time a TypedDict compiles each of its annotations
    from typing import TypedDict

    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.engine.types import RunStopReason
    from nexus.ledger import Ledger

    class StartOptions(TypedDict, total=False):
        """The options of :meth:`Runtime.start` (and ``begin``, ``run``); see there."""

        consumes: Sequence[str]
        lease_fence: bool
        source: str | None
        tools: Sequence[AgentTool]
        images: Sequence[ImageContent]
        event: EventContext | None
        signal: AbortSignal | None
        callbacks: EngineCallbacks | None


@dataclass(slots=True, frozen=True)
class StartRequest:
    """What :meth:`Runtime.start` hands its task: the message and what the run consumes and may use."""

    message: str | UserMessage
    consumes: tuple[str, ...]
    source: str | None
    tools: tuple[AgentTool, ...]
    images: tuple[ImageContent, ...]
    event: EventContext | None
    lease_fence: bool = True
    """The consumed items may have been claimed under a session lease: the turn write checks they are
    still this run's (``TurnWrite.lease_fence``)."""


_WAITED = "aborted while waiting for another run of the session to finish; nothing was sent or stored"


def aborted_before_start(message: str | UserMessage, text: str = _WAITED) -> AgentResult:
    """The result of a run aborted while it waited for another run of its session: nothing ran or was stored."""
    from nexus.engine.types import AgentError
    from nexus.ledger import StoredMessage

    query = message if isinstance(message, UserMessage) else UserMessage(message)
    return AgentResult(
        messages=[StoredMessage(0, "", 0, query.role, query)],
        stop_reason="aborted",
        error=AgentError("unknown", text, retryable=True),
    )


async def answered_before_start(ledger: Ledger, request: StartRequest) -> AgentResult | None:
    """The result of a run whose queue items were finished as its session's lock was taken, or ``None``: run it.

    The lock puts the session's orphaned turns in the ledger first. One whose final write failed (a full disk)
    comes from its rescue file, consuming the queue items it answered in that transaction; the broker, which
    saw the write fail, runs the same batch again, and this run would answer its messages a second time on
    top of the rescued turn (one message in two completed turns). Consumed by one turn: that turn's result,
    as if this run had written it. Only some finished: nothing runs (aborted, nothing stored); the broker's
    next claim skips the finished ones and runs the others. Only after a recovery: no read on other runs.
    """
    items = await ledger.queue.get_many(request.consumes)  # one read, however many messages the batch holds
    finished = [item for item in items if item is not None and item.status not in ("queued", "processing")]
    if not finished:
        return None
    turn_ids = {item.turn_id if item.status == "delivered" else None for item in finished}
    if len(finished) == len(items) and len(turn_ids) == 1 and (turn_id := turn_ids.pop()) is not None:
        return await _result_of(ledger, turn_id)
    return aborted_before_start(request.message, "some of the run's messages were finished before it started")


async def _result_of(ledger: Ledger, turn_id: str) -> AgentResult:
    """A written turn as the result of the run that wrote it: its messages, status and error."""
    from nexus.engine.types import RUN_STATUS, AgentError

    turn = await ledger.turns.get(turn_id)
    stop = turn.stop_reason or ""
    if RUN_STATUS.get(cast("RunStopReason", stop)) != turn.status:  # not one of the engine's: from the status
        stop = {"completed": "end_turn", "aborted": "aborted"}.get(turn.status, "error")
    error = turn.error.get("message") if isinstance(turn.error, dict) else turn.error
    return AgentResult(
        messages=await ledger.turns.messages(turn_id),
        stop_reason=cast("RunStopReason", stop),
        error=None if turn.status == "completed" else AgentError("unknown", str(error or f"the turn {turn.status}")),
        turn_id=turn_id,
    )


_KINDS: dict[str, tuple[type, bool]] = {
    "images": (ImageContent, True), "consumes": (str, True), "tools": (AgentTool, True), "source": (str, False),
    "event": (EventContext, False), "signal": (AbortSignal, False),
}  # fmt: skip
"""The type of each start option's value (``True``: of each item of its list); ``None`` is allowed for the single
ones. ``callbacks`` is checked against :class:`EngineCallbacks`, imported only when given."""


def check_start(spec: object, session: object, message: object, options: Mapping[str, object]) -> None:
    """``TypeError`` naming the argument of ``Runtime.start``/``begin``/``run`` that is of the wrong kind.

    Called before the session is looked up: ``run(..., images=["x"])`` made the session and then failed in
    the run's task (``AttributeError: 'str' object has no attribute 'id'``), and ``message=None`` ran a turn.
    On every start (the broker's too): exact-type checks first, the generic ones only when those miss.
    """
    if not isinstance(spec, AgentSpec):
        raise TypeError(f"spec must be an AgentSpec, got {type(spec).__name__}")
    if type(session) is not str and not isinstance(session, str):
        raise TypeError(f"session must be a session name (str), got {type(session).__name__}")
    if type(message) is not str and not isinstance(message, (str, UserMessage)):
        raise TypeError(f"message must be text or a UserMessage, got {type(message).__name__}")
    for key, value in options.items():  # an unknown key was refused by the call itself
        if key == "lease_fence":
            if value is not True and value is not False:
                raise TypeError(f"lease_fence must be True or False, got {value!r:.60}")
            continue
        kind, many = _KINDS[key] if key != "callbacks" else (_callbacks_type(), False)
        if not many:
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"{key} must be {kind.__name__} or None, got {type(value).__name__}")
            continue
        if (
            type(value) is not tuple
            and type(value) is not list
            and (isinstance(value, (str, bytes)) or not isinstance(value, Sequence))
        ):
            raise TypeError(f"{key} must be a list of {kind.__name__}, got {type(value).__name__}")
        for item in value:
            if not isinstance(item, kind):
                raise TypeError(f"{key} must be a list of {kind.__name__}, got an item {item!r:.60}")


def _callbacks_type() -> type:
    from nexus.engine.execution.callbacks import EngineCallbacks

    return EngineCallbacks


STARTS_PER_ROUND = 4
"""At most this many runs' starting steps (lock, assembly, turn open) are let go per round of the event loop."""


class _StartGate:
    """Lets the first steps of runs started together go on a few per round of the loop, in the order they came.

    A run's starting step (the session's lock, its reads, the assembly, the turn's open) is ~1 ms of the loop's
    CPU before its first real wait. 1,000 runs started back to back had 1,000 such steps ready in one round of
    the loop, which then stood still for over a second: a timer, a socket or an HTTP request waited that long
    (bench/bench_engine_concurrent.py). Here at most :data:`STARTS_PER_ROUND` go on per round; the others wait
    their turn (FIFO, so runs of one session still take its lock in the order they were started), and the loop
    serves everything else between rounds. A start that finds the gate open (fewer came this round) does not
    wait at all: only a burst is spread. What a run does is unchanged: its step only runs a few rounds later,
    as if it had been started then; aborted meanwhile, it ends as a run aborted right after its start does;
    cancelled meanwhile, it ends before its session's lock, with nothing written.
    """

    __slots__ = ("admitted", "loop", "scheduled", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # a strong one, as the value of its own weak key, would keep the loop forever
        self.admitted = 0
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.scheduled = False

    def admit(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """``None``: go on now; else a future that is done when it is this start's turn.

        The count is reset by a callback in the next round, scheduled only once the gate is full: a lone start
        costs no callback (starts spread over rounds add up until one fills the gate, so at worst a start waits
        one round more than it had to)."""
        if self.admitted < STARTS_PER_ROUND and not self.waiting:
            self.admitted += 1
            if self.admitted == STARTS_PER_ROUND:
                self._schedule(loop)
            return None
        turn = loop.create_future()
        self.waiting.append(turn)
        self._schedule(loop)
        return turn

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self.next_round)

    def next_round(self) -> None:
        """Let the next few waiting starts go (their steps run in the next round); close the round's gate."""
        released = 0
        while self.waiting and released < STARTS_PER_ROUND:
            turn = self.waiting.popleft()
            if not turn.done():  # done: cancelled while it waited
                turn.set_result(None)
                released += 1
        loop = self.loop()
        if not released or loop is None:
            self.admitted, self.scheduled = 0, False
            return
        # full until the next round: a start arriving now waits behind those just let go (they run next round)
        self.admitted = STARTS_PER_ROUND
        loop.call_soon(self.next_round)


_gate = per_loop(_StartGate)


async def admitted() -> None:
    """Return when this run's starting step may go on: at once, or later in a burst (see :class:`_StartGate`)."""
    loop = asyncio.get_running_loop()
    turn = _gate(loop).admit(loop)
    if turn is not None:
        await turn
