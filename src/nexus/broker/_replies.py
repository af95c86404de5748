"""Replies to agents that asked without waiting: each becomes a durable ``worker_result`` message.

When a turn consumed a message whose sender asked for the answer later (``metadata.reply_to``),
the turn's reply (or ``(failed: …)``) is queued to the asker as a ``followup`` with the id
``<message id>:reply`` — idempotent, so sending it again after a crash queues nothing twice.
On start, replies a crash kept from being sent (the turn is written, the reply is not) are sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container, Sequence
from typing import TYPE_CHECKING

from nexus.broker._hops import ConversationHops
from nexus.broker._items import error_text, reply_deliver_to_of, reply_session_of
from nexus.broker.session_queue import QueuedMessage
from nexus.broker.types import AgentMessage, BrokerError, SendReceipt
from nexus.ledger import REPLY_SUFFIX

if TYPE_CHECKING:
    from nexus.engine import AgentResult
    from nexus.ledger import QueueStore

log = logging.getLogger("nexus.broker")


class ReplySender:
    """Sends workers' replies back to the agents that asked (see the module docstring)."""

    def __init__(
        self,
        send: Callable[[AgentMessage, str], Awaitable[SendReceipt]],
        agents: Container[str],
        queue: QueueStore,
        reply_text: Callable[[str], Awaitable[str | None]] | None,
        hops: ConversationHops,
    ) -> None:
        """``send(message, mode)`` is the broker's; ``agents`` its registry (a reply goes to a registered
        asker only); ``reply_text(turn_id)`` reads a turn's reply from the ledger (``None``: no recovery); ``hops``
        numbers a reply one hop past its conversation's highest, as every agent-to-agent message."""
        self._send = send
        self._agents = agents
        self._queue = queue
        self._reply_text = reply_text
        self._hops = hops

    async def answer_askers(self, agent_id: str, items: Sequence[QueuedMessage], outcome: AgentResult) -> None:
        """Send the turn's reply back to agents that asked without waiting (a durable ``worker_result``):
        ``items`` are the messages the turn consumed (its batch and the steers it read)."""
        for item in items:
            if item.reply_to is None or item.reply_to == agent_id or item.reply_to not in self._agents:
                continue
            text = outcome.reply if outcome.status == "completed" else f"(failed: {error_text(outcome)})"
            await self.send_reply(agent_id, item.reply_to, item.message_id, item.conversation_id, item.hop,
                                  text or "(no text reply)", session=item.reply_session,
                                  deliver_to=item.reply_deliver_to)  # fmt: skip

    async def answer_unanswered(self) -> None:
        """After a crash between a turn and its reply: send the replies the previous process did not.

        An ask that failed (its run cut by crashes ``max_attempts`` times, failed by this start) is
        answered ``(failed: <reason>)``: its asker waited for a reply that no turn will write.
        """
        if self._reply_text is None:
            return
        for item, asker in await self._queue.unanswered_replies():
            if item.status == "failed":
                text: str | None = f"(failed: {item.error or 'the message was not run'})"
            else:
                text = await self._reply_text(item.turn_id) if item.turn_id else None
            if item.agent_id and asker in self._agents and item.message_id:
                message = item.message if isinstance(item.message, dict) else {}
                hop = message.get("metadata", {}).get("hop", 0) if isinstance(message.get("metadata"), dict) else 0
                await self.send_reply(item.agent_id, asker, item.message_id, message.get("conversation_id"),
                                      hop if isinstance(hop, int) else 0, text or "(no text reply)",
                                      session=reply_session_of(message.get("metadata")),
                                      deliver_to=reply_deliver_to_of(message.get("metadata")))  # fmt: skip

    async def send_reply(
        self,
        worker: str,
        asker: str,
        message_id: str,
        conversation_id: str | None,
        hop: int,
        text: str,
        *,
        session: str | None = None,
        deliver_to: dict[str, object] | None = None,
    ) -> None:
        """Queue ``text`` from ``worker`` to ``asker`` as the reply to ``message_id`` (never raises).

        The reply carries the highest hop its conversation reached (at least ``hop``, the ask's), so an ask its
        asker's next turn sends is numbered past every ask before it (see ``nexus.broker._hops``); it takes no
        number of its own: a reply is owed, never refused, and does not use up the conversation's asks."""
        metadata: dict[str, object] = {
            "kind": "worker_result",
            "in_reply_to": message_id,
            "hop": self._hops.highest(conversation_id, hop),
        }
        if deliver_to:
            metadata["deliver_to"] = deliver_to  # the chat the asker's turn answered: its next turn answers it too
        reply = AgentMessage(
            id=message_id + REPLY_SUFFIX,
            from_=worker,
            to=asker,
            content=text,
            conversation_id=conversation_id,
            metadata=metadata,
            session=session,  # the asker's session it asked from (a chat's): its next turn answers there
        )
        try:
            await self._send(reply, "followup")
        except BrokerError as exc:  # e.g. the asker's queue refuses (cap, policy new): recorded, not raised
            log.warning("the reply of %s to %s could not be queued: %s", worker, asker, exc)
