"""Send a message to an agent and wait for its reply, with the reply's text as it streams.

What the MCP face (:mod:`nexus.server._mcp_face`) needs from the broker, in one place:

- the message is accepted durably and idempotently on its id, through the broker when it drains in
  this process, else into the durable queue for the process that drains (``nexus serve``);
- the send's receipt follows the run the message is handed to: its text streams from that
  :class:`~nexus.engine.Execution`'s events, and the receipt's outcome says when it ended;
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
    from nexus.broker import SendReceipt
    from nexus.ledger import QueueItem, StoredMessage
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
    from nexus.server._messages import accept_with_receipt

    answer, receipt = await accept_with_receipt(
        state, agent_id, content, mode=mode, message_id=message_id, sender="user", session=session
    )
    streaming = None
    if receipt is not None and not receipt.duplicate:
        streaming = asyncio.get_running_loop().create_task(_stream_text(receipt, on_text))
    try:
        reply = await _settle(state, str(answer["queue_item_id"]), receipt, timeout_s)
    finally:
        if streaming is not None:
            streaming.cancel()
    reply.message_id = str(answer["message_id"])
    reply.duplicate = bool(answer["duplicate"])
    return reply


async def _stream_text(receipt: SendReceipt, on_text: Callable[[str], None]) -> None:
    """The reply text of the run the message is handed to, as it streams."""
    from nexus.engine import ReplyDelta

    followed = await receipt.follow()
    if followed is None:
        return
    _, subscription = followed
    async for item in subscription:
        if isinstance(item.event, ReplyDelta):
            on_text(item.event.delta)


async def _settle(state: ServerState, item_id: str, receipt: SendReceipt | None, timeout_s: float) -> Reply:
    """Read the queue item until it is finished (woken by the receipt's outcome when the run is here)."""
    deadline = time.monotonic() + timeout_s
    ended = None if receipt is None else asyncio.ensure_future(receipt.outcome())
    try:
        while True:
            item = await state.ledger.queue.get(item_id)
            if item is None:
                return Reply("failed", "", item_id, "", error=f"queue item {item_id} is gone (cleared?)")
            if item.status in _FINISHED:
                return await _finished(state, item)
            left = deadline - time.monotonic()
            if left <= 0:
                error = f"no reply within the wait; the message is {item.status} and stays queued"
                return Reply("waiting", "", item_id, item.session_label, error=error)
            if ended is None or ended.done():
                await asyncio.sleep(min(POLL_S, left))
            else:
                await asyncio.wait([ended], timeout=min(POLL_S, left))
    finally:
        if ended is not None:
            ended.cancel()


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
