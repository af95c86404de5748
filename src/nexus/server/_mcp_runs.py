"""Send a message to an agent and wait for its reply, with the reply's text as it streams.

What the MCP face (:mod:`nexus.server._mcp_face`) needs from the broker, in one place:

- the message is accepted durably and idempotently on its id, through the broker when it drains in
  this process, else into the durable queue for the process that drains (``nexus serve``);
- the run that consumes its queue item is found to stream its text: today through
  :meth:`EngineRunner.on_run` (as the OpenAI facade does); when the broker's ``send()`` returns a
  receipt whose ``execution()`` resolves to that run, only :class:`_RunFinder` changes;
- the end is read from the queue item (delivered with its turn, failed, dropped), so a message
  steered into a run already going, one drained by another process and a retry of one already
  answered all end the same way: with the reply of the turn that consumed it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.broker.runner import RunOutcome
    from nexus.ledger.records import QueueItem, StoredMessage
    from nexus.server._state import ServerState

POLL_S = 0.25
"""How often a waiting send re-reads its queue item (a run in another process, a steer, a drop)."""

_FINISHED = ("delivered", "failed", "dropped")


@dataclass(slots=True)
class Reply:
    """How a message ended: ``completed | failed | aborted | dropped``, or ``waiting`` if the wait ran out first."""

    status: str
    message_id: str
    queue_item_id: str
    session: str
    duplicate: bool = False
    turn_id: str | None = None
    reply: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON an MCP client gets."""
        return {
            "status": self.status,
            "reply": self.reply,
            "error": self.error,
            "session": self.session,
            "turn_id": self.turn_id,
            "message_id": self.message_id,
            "queue_item_id": self.queue_item_id,
            "duplicate": self.duplicate,
        }


class _RunFinder:
    """Finds the run that consumes one of ``item_ids`` and hands its text deltas to ``on_text``."""

    def __init__(self, state: ServerState, on_text: Callable[[str], None]) -> None:
        self.item_ids: set[str] = set()
        self.found: asyncio.Future[EngineRunHandle] = asyncio.get_running_loop().create_future()
        self._on_text = on_text
        runner = state.runner
        self._remove = runner.on_run(self._on_run) if runner is not None else (lambda: None)

    def _on_run(self, handle: EngineRunHandle) -> None:
        if self.found.done() or not self.item_ids.intersection(handle.request.item_ids):
            return
        handle.on_event(self._listen)
        self.found.set_result(handle)

    def _listen(self, event: object) -> None:
        from nexus.engine.execution.events import ReplyDelta

        inner = getattr(event, "event", event)  # the channel's envelope
        if isinstance(inner, ReplyDelta):
            self._on_text(inner.delta)

    def close(self) -> None:
        self._remove()


async def send_and_wait(
    state: ServerState,
    agent_id: str,
    content: str,
    *,
    message_id: str | None,
    session: str | None,
    mode: str | None,
    timeout_s: float,
    on_text: Callable[[str], None],
) -> Reply:
    """Accept the message (idempotent on ``message_id``), then wait up to ``timeout_s`` for its turn's end."""
    from nexus.server._messages import accept_message

    finder = _RunFinder(state, on_text)
    try:
        # no run can take the item before accept returns to us: the drain starts after the send
        answer = await accept_message(
            state, agent_id, content, mode=mode, message_id=message_id, sender="user", session=session
        )
        item_id = str(answer["queue_item_id"])
        finder.item_ids.add(item_id)
        reply = await _settle(state, item_id, finder, timeout_s)
    finally:
        finder.close()
    reply.message_id = str(answer["message_id"])
    reply.duplicate = bool(answer["duplicate"])
    return reply


async def _settle(state: ServerState, item_id: str, finder: _RunFinder, timeout_s: float) -> Reply:
    deadline = time.monotonic() + timeout_s
    while True:
        item = await state.ledger.queue.get(item_id)
        if item is None:
            return Reply("failed", "", item_id, "", error=f"queue item {item_id} is gone (cleared?)")
        if item.status in _FINISHED:
            return await _finished(state, item)
        left = deadline - time.monotonic()
        if left <= 0:
            return Reply("waiting", "", item_id, item.session_label,
                         error=f"no reply within the wait; the message is {item.status} and stays queued")  # fmt: skip
        try:
            handle = await asyncio.wait_for(asyncio.shield(finder.found), min(POLL_S, left))
        except TimeoutError:
            continue
        outcome = await _wait_run(handle, deadline)
        if outcome is not None and outcome.turn_id is not None:
            return _from_outcome(outcome, item_id, item.session_label)
        # the run ended without a turn (aborted before it started): the item is queued again or failed


async def _wait_run(handle: EngineRunHandle, deadline: float) -> RunOutcome | None:
    try:
        return await asyncio.wait_for(handle.result(), max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return None


def _from_outcome(outcome: RunOutcome, item_id: str, session: str) -> Reply:
    status = outcome.status if outcome.status in ("completed", "failed", "aborted") else "failed"
    return Reply(status, "", item_id, session, turn_id=outcome.turn_id, reply=outcome.reply, error=outcome.error)


async def _finished(state: ServerState, item: QueueItem) -> Reply:
    if item.status != "delivered" or item.turn_id is None:
        return Reply(item.status if item.status == "dropped" else "failed", "", item.id, item.session_label,
                     error=item.error or f"the message was {item.status}")  # fmt: skip
    turn = await state.ledger.turns.get(item.turn_id)
    status = turn.status if turn.status in ("completed", "failed", "aborted") else "completed"
    reply = _reply_text(await state.ledger.turns.messages(turn.id))
    return Reply(status, "", item.id, item.session_label, turn_id=turn.id, reply=reply)


def _reply_text(messages: list[StoredMessage]) -> str | None:
    """The text of a turn's last assistant message that has any (the reply), or ``None``."""
    for stored in reversed(messages):
        if stored.role == "assistant":
            text = "".join(getattr(block, "text", "") for block in stored.message.content)
            if text:
                return text
    return None
