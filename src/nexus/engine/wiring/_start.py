"""What a start of a run carries: the options of ``Runtime.start``, the request its task gets, and the
result of a start that never ran (aborted while another run of the session held its lock, or its messages
answered by a turn the lock recovered)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from nexus._dataclass import dataclass
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
    items = [await ledger.queue.get(item_id) for item_id in request.consumes]
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
