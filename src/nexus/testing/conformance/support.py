"""What the conformance modules share, and a ledger test of yours can use: the capability marks, message
builders (``user``, ``reply``, ``tool_round``, ``texts``) and small turn writers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nexus.ledger import (
    HEAD,
    CompactionRecord,
    Ledger,
    NewSession,
    Session,
    TurnDetails,
    TurnOpen,
    TurnWrite,
)
from nexus.llm import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

REQUIRED = ("turns", "sessions", "queue")
"""The stores every backend must have, with all of their protocol (``TurnStore``, ``SessionStore``, ``QueueStore``)."""

OPTIONAL = {
    "tree": ("turns", "TurnTree"),
    "pointer_log": ("sessions", "PointerLog"),
    "queue_feed": ("queue", "QueueFeed"),
    "agents": ("agents", "AgentStore"),
    "deliveries": ("deliveries", "DeliveryStore"),
    "leases": ("leases", "LeaseStore"),
}
"""Optional capabilities: name -> (the ledger attribute, the protocol it implements when present)."""

ROUTING = "routing"
"""The optional capability whose store is not a ledger attribute: smart routing keeps its index and decisions
in the ledger's database through :func:`nexus.routing.open_route_store` (SQLite and PostgreSQL have one)."""


def has(ledger: Ledger, capability: str) -> bool:
    """Whether ``ledger`` has an optional capability (its store exists and implements the protocol)."""
    import nexus.ledger

    if capability == ROUTING:
        return _has_route_store(ledger)
    attribute, protocol = OPTIONAL[capability]
    store = getattr(ledger, attribute, None)
    return store is not None and isinstance(store, getattr(nexus.ledger, protocol))


def _has_route_store(ledger: Ledger) -> bool:
    from nexus.routing import RouteStore, open_route_store

    try:
        store = open_route_store(ledger)
    except (AttributeError, TypeError):  # not one of ours: no path, no database
        return False
    try:
        return isinstance(store, RouteStore)
    finally:
        store.close()


def need(ledger: Ledger, *capabilities: str) -> None:
    """Skip the calling test unless ``ledger`` has every one of ``capabilities`` (optional ones)."""
    missing = [c for c in capabilities if not has(ledger, c)]
    if missing:
        pytest.skip(f"optional capability not implemented: {', '.join(missing)}")


# --------------------------------------------------------------------------- messages


def user(text: str) -> UserMessage:
    """A plain user message."""
    return UserMessage(text)


def reply(text: str, *, input_tokens: int = 10, output_tokens: int = 5) -> AssistantMessage:
    """A final assistant text message with usage."""
    return AssistantMessage(
        [TextContent(text)],
        api="openai-completions",
        provider="fake",
        model="fake-model",
        usage=Usage(input_tokens, output_tokens, total=input_tokens + output_tokens),
    )


def tool_round(call_id: str, name: str = "read", result: str = "file body") -> list[Message]:
    """An assistant tool call and its result (one unit)."""
    call = AssistantMessage(
        [ToolCall(call_id, name, {"path": f"{call_id}.txt"})],
        api="openai-completions",
        provider="fake",
        model="fake-model",
        stop_reason="tool_use",
        usage=Usage(7, 3, total=10),
    )
    return [call, ToolResultMessage(call_id, name, [TextContent(result)])]


def texts(messages: Sequence[Message]) -> list[str]:
    """A compact text view of a message list, for readable assertions."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            content = m.content if isinstance(m.content, str) else "".join(getattr(b, "text", "") for b in m.content)
            out.append("U:" + content)
        elif isinstance(m, AssistantMessage):
            calls = ",".join(c.id for c in m.tool_calls)
            out.append("A:" + (m.text or f"call({calls})"))
        else:
            out.append(f"R:{m.tool_call_id}")
    return out


# --------------------------------------------------------------------------- writers

_DETAILS = frozenset(TurnDetails.__dataclass_fields__)


def _split(fields: dict[str, Any]) -> tuple[dict[str, Any], TurnDetails]:
    """Keywords of a record and those of its :class:`TurnDetails` (model, provider, run_id, ...)."""
    details = {k: fields.pop(k) for k in list(fields) if k in _DETAILS}
    return fields, TurnDetails(**details)


async def write_turn(ledger: Ledger, turn_id: str | None, session: str, **fields: Any) -> str:
    """``ledger.turns.write`` of a :class:`TurnWrite` built from keywords (details keywords included)."""
    rest, details = _split(fields)
    return await ledger.turns.write(TurnWrite(session, turn_id, details=details, **rest))


async def open_turn(ledger: Ledger, session: str, **fields: Any) -> str:
    """``ledger.turns.open`` of a :class:`TurnOpen` built from keywords (details keywords included)."""
    rest, details = _split(fields)
    query = rest.pop("query_messages")
    return await ledger.turns.open(TurnOpen(session, query, details, rest.pop("parent_turn_id", HEAD), **rest))


async def fork(ledger: Ledger, turn_id: str, label: str | None = None) -> Session:
    """A fork: a new session whose head is ``turn_id``."""
    return await ledger.sessions.create(NewSession(label, origin="fork", head_turn_id=turn_id))


async def qa_turn(ledger: Ledger, session: str, q: str, a: str, **fields: Any) -> str:
    """Write a finished turn: one user question, one assistant answer."""
    return await write_turn(ledger, None, session, query_messages=[user(q)], response_messages=[reply(a)], **fields)


def compaction(through: str, first_kept: str | None) -> CompactionRecord:
    """A compaction summarising up to ``through`` and keeping turns from ``first_kept``."""
    return CompactionRecord(
        summary="they talked about 1 and 2",
        summarized_through_turn_id=through,
        first_kept_turn_id=first_kept,
        turns_summarized=2,
        model="cheap-model",
        tokens_before=1000,
        tokens_after=200,
        trigger="context_limit",
    )


async def compact_turn(ledger: Ledger, session: str, through: str, first_kept: str | None, **fields: Any) -> str:
    """Write a compaction turn summarising up to ``through`` and keeping turns from ``first_kept``."""
    return await write_turn(ledger, None, session, compaction=compaction(through, first_kept), **fields)
