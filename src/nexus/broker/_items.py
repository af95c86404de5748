"""Turning stored queue rows into queued messages, and checking messages before they are accepted."""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING

from nexus.broker._slot import AgentSlot
from nexus.broker.modes import parse_mode
from nexus.broker.session_queue import QueuedMessage
from nexus.broker.types import MAX_CONTENT_CHARS, AgentMessage, BrokerError, SendAndWaitResult, SendReceipt, Ticket
from nexus.ledger import QueueItem

if TYPE_CHECKING:
    from nexus.engine import AgentResult


def check_message(message: AgentMessage) -> None:
    """Refuse a message the broker must not store (no id, no content, too long, to itself)."""
    if not message.id:
        raise BrokerError("a message needs a non-empty id (it makes send idempotent)")
    if not message.content or message.content.isspace():  # no stripped copy of every message
        raise BrokerError(f"message {message.id!r} has no content")
    if len(message.content) > MAX_CONTENT_CHARS:
        raise BrokerError(
            f"message {message.id!r} is {len(message.content):,} characters; the limit is {MAX_CONTENT_CHARS:,}"
        )
    if message.from_ == message.to:
        raise BrokerError(f"agent {message.to!r} cannot send a message to itself")


def duplicate_receipt(slot: AgentSlot, message: AgentMessage, row: QueueItem) -> SendReceipt:
    """A message accepted earlier: its receipt follows the first one's run (or tells how it ended)."""
    if row.status in ("queued", "processing"):
        found = slot.sessions.get(row.session_label)
        held = found.queue.find(row.id) if found is not None else None
        ticket = held.ticket if held is not None else None
    elif row.status == "delivered":
        ticket = Ticket(SendAndWaitResult(True, turn_id=row.turn_id))
    else:
        ticket = Ticket(SendAndWaitResult(False, error=row.error or f"the message was {row.status}"))
    return SendReceipt(message.id, row.id, duplicate=True, ticket=ticket)


def message_source(sender: str | None, agents: Container[str]) -> str:
    """The ledger ``source`` of a message from ``sender`` (docs/broker.md, "Where a message came from").

    ``user`` for a plain CLI/HTTP send (no sender, or ``user``); ``agent:<id>`` for a registered
    agent; anything else as it came (an inbound chat sender such as ``telegram:42``, ``system``).
    """
    if sender is None or sender == "user":
        return "user"
    return f"agent:{sender}" if sender in agents else sender


def session_key_of(row: QueueItem) -> str | None:
    """The session key a stored message named (``None``: the agent's own session)."""
    message = row.message
    key = message.get("session") if isinstance(message, dict) else None
    return key if isinstance(key, str) and key else None


def queued(
    row: QueueItem, *, debounce_ms: int = 0, message: AgentMessage | None = None, max_attempts: int = 0
) -> QueuedMessage:
    """The in-memory queue entry of a stored row (``ValueError`` etc. for a row this version cannot read).

    ``message``: the row's message already parsed (``send`` has it), so it is not parsed again.
    ``max_attempts``: the crash-retry limit (0: unknown, a cut row runs alone). For a row reloaded
    ``processing`` (a crash cut its runs) its cut runs, and whether its next run is the last one,
    are kept: its batch is bisected (:func:`nexus.broker.session_queue.bisect_suspects`).
    """
    cut = row.attempts if row.status == "processing" else 0
    if message is None and isinstance(row.message, dict):
        message = AgentMessage.from_json({"id": row.message_id or row.id, "to": row.agent_id, **row.message})
    prompt = message.content if message is not None else str(row.message)
    if not prompt or prompt.isspace():
        raise ValueError("the message has no content")
    # Positional (item, message id, prompt, mode, enqueued, debounce, sender, route, conversation): a class called
    # with keywords builds a dict of them and unpacks it again, for every message.
    queued_message = QueuedMessage(
        row.id, row.message_id or row.id, prompt, parse_mode(row.mode), row.enqueued_at, debounce_ms,
        row.sender if row.sender not in (None, "user") else None, "",
        message.conversation_id if message is not None else None,
    )  # fmt: skip
    if cut:  # reloaded processing: a crash cut its runs
        queued_message.cut_runs = cut
        queued_message.last_attempt = cut + 1 >= max_attempts
    metadata = message.metadata if message is not None else None
    if metadata:  # most messages carry none: the fields keep their defaults
        queued_message.hop = _hop(metadata)
        queued_message.reply_to = _text(metadata.get("reply_to"))
        queued_message.reply_session = reply_session_of(metadata)
        queued_message.reply_deliver_to = reply_deliver_to_of(metadata)
        queued_message.deliver_to = _deliver_to(metadata)
        queued_message.max_tokens = positive_int(metadata.get("max_tokens"))
        queued_message.traceparent = _text(metadata.get("traceparent"))
    return queued_message


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def reply_session_of(metadata: object) -> str | None:
    """The asker's session key stored with a message (``metadata.reply_session``), if any."""
    value = metadata.get("reply_session") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def reply_deliver_to_of(metadata: object) -> dict[str, object] | None:
    """The chat target the asker's turn answered (``metadata.reply_deliver_to``), if any."""
    value = metadata.get("reply_deliver_to") if isinstance(metadata, dict) else None
    return dict(value) if isinstance(value, dict) and value else None


def _deliver_to(metadata: dict[str, object]) -> dict[str, object] | None:
    value = metadata.get("deliver_to")
    return dict(value) if isinstance(value, dict) and value else None


def positive_int(value: object) -> int | None:
    """``value`` when it is an int above 0 (not a bool), else None: a limit read from stored JSON."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _hop(metadata: dict[str, object]) -> int:
    hop = metadata.get("hop")
    return hop if isinstance(hop, int) and hop >= 0 else 0


def error_text(result: AgentResult) -> str | None:
    """Why a run did not complete (``None`` when it did)."""
    if result.status == "completed":
        return None
    return (result.error.message if result.error is not None else None) or f"the run ended {result.status}"
