"""JSON shapes of ledger and broker records as the API returns them (one place, so routes agree)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from nexus.engine import split_event_context
from nexus.ledger import AgentRow, Ledger, QueueItem, Session, StoredMessage, ToolCallRecord, Turn, TurnNotFound
from nexus.llm import Message, TextContent, UserMessage, message_to_dict
from nexus.server._owners import TITLE_KEY, Owners


def session_view(session: Session, owners: Owners) -> dict[str, Any]:
    """A session: its label and title, head turn, where it came from, its agent and how to reach it."""
    owned = owners.of(session)
    title = session.metadata.get(TITLE_KEY) if session.metadata else None
    return {
        "label": session.label,
        "title": title if isinstance(title, str) else None,
        "head_turn_id": session.thread_id,
        "origin": session.origin,
        "status": session.status,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "is_subagent": session.is_subagent,
        "parent_session_label": session.parent_session_label,
        "agent": owned.agent_id,
        "session_key": owned.session_key,
        "channel": owned.channel,
    }


def turn_view(turn: Turn) -> dict[str, Any]:
    """A turn's summary: place in the tree, status, model, tokens and cost."""
    return {
        "id": turn.id,
        "parent_turn_id": turn.parent_turn_id,
        "session_label": turn.session_label,
        "turn_type": turn.turn_type,
        "status": turn.status,
        "depth": turn.depth,
        "model": turn.model,
        "provider": turn.provider,
        "started_at": turn.started_at,
        "completed_at": turn.completed_at,
        "input_tokens": turn.input_tokens,
        "output_tokens": turn.output_tokens,
        "total_tokens": turn.total_tokens,
        "cost": turn.cost,
        "stop_reason": turn.stop_reason,
        "tool_call_count": turn.tool_call_count,
        "has_children": turn.has_children,
        "error": turn_error_text(turn),
    }


def message_view(stored: StoredMessage) -> dict[str, Any]:
    """A stored message with its ledger id and the message in nexus.llm's JSON form.

    A user message also gets ``text`` (what the user wrote) and ``event_context`` (the header the
    engine put before it for the model: time, channel, sender; ``null`` when there was none).
    """
    view = {"id": stored.id, "turn_id": stored.turn_id, "ordinal": stored.ordinal, **message_to_dict(stored.message)}
    if isinstance(stored.message, UserMessage):
        view["event_context"], view["text"] = split_event_context(_user_text(stored.message))
    return view


def _user_text(message: UserMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else "".join(b.text for b in content if isinstance(b, TextContent))


PREVIEW_CHARS = 200


def turn_preview(messages: list[StoredMessage]) -> str:
    """What a turn is about, in one line for a tree: what the user wrote (else the reply's start)."""
    for role in ("user", "assistant"):
        for stored in messages:
            if stored.message.role == role:
                text = " ".join(_plain_text(stored.message).split())
                if text:
                    return text[:PREVIEW_CHARS]
    return ""


def _plain_text(message: Message) -> str:
    if isinstance(message, UserMessage):
        return split_event_context(_user_text(message))[1]
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def tool_call_view(call: ToolCallRecord) -> dict[str, Any]:
    """A tool call of a turn."""
    return {
        "call_id": call.call_id,
        "tool_name": call.tool_name,
        "arguments": call.arguments,
        "status": call.status,
        "error": call.error,
        "started_at": call.started_at,
        "completed_at": call.completed_at,
        "spawned_session_label": call.spawned_session_label,
    }


def agent_loads(items: Iterable[QueueItem], broker: Any) -> Callable[[str], dict[str, Any]]:
    """For an agent id, its ``state`` and ``queue_depth`` as :func:`agent_view` takes them, from its waiting
    and processing queue ``items`` and ``broker`` (this process's, or ``None``).

    The broker's state when it is not idle; else ``running`` while one of the agent's messages is being
    processed (a claim only a run holds: another process's broker, or a nested ``nexus mcp serve`` asked
    by the very run it reports — both said ``idle`` when only this process's broker was asked); else idle.
    """
    depths: dict[str, int] = {}
    busy: set[str] = set()
    for item in items:
        agent = item.agent_id or ""
        depths[agent] = depths.get(agent, 0) + 1
        if item.status == "processing":
            busy.add(agent)

    def load(agent_id: str) -> dict[str, Any]:
        live = broker.get_agent(agent_id) if broker is not None else None
        state = live.state if live is not None else "idle"
        if state == "idle" and agent_id in busy:
            state = "running"
        return {"state": state, "queue_depth": depths.get(agent_id, 0)}

    return load


def agent_view(row: AgentRow, *, state: str = "idle", queue_depth: int = 0) -> dict[str, Any]:
    """A registered agent with its live state (``idle`` when nothing runs it: :func:`agent_loads`)."""
    return {
        "id": row.agent_id,
        "role": row.role,
        "session_label": row.session_label,
        "spec": row.spec,
        "state": state,
        "queue_depth": queue_depth,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def queue_item_view(item: QueueItem, turn: Turn | None = None) -> dict[str, Any]:
    """A durable queue item (the same form as ``nexus queue list --json``) and the outcome of its turn.

    ``delivered`` means a turn consumed the message (it is never run again); ``turn_status`` says how
    that turn ended (``completed``, ``failed``, ``aborted``, ``running``) and ``turn_error`` why it
    failed — ``null`` both while no turn holds the item.
    """
    return {**item.to_json(), "turn_status": turn.status if turn else None, "turn_error": turn_error_text(turn)}


async def queue_item_views(ledger: Ledger, items: list[QueueItem]) -> list[dict[str, Any]]:
    """:func:`queue_item_view` of each item, with its turn read from the ledger."""
    turns = await item_turns(ledger, items)
    return [queue_item_view(item, turns.get(item.turn_id or "")) for item in items]


async def item_turns(ledger: Ledger, items: list[QueueItem]) -> dict[str, Turn]:
    """The turns that consumed ``items``, by id (one read per turn; a turn missing from the ledger is left out)."""
    turns: dict[str, Turn] = {}
    for turn_id in dict.fromkeys(item.turn_id for item in items if item.turn_id):
        try:
            turns[turn_id] = await ledger.turns.get(turn_id)
        except TurnNotFound:
            continue
    return turns


def turn_error_text(turn: Turn | None) -> str | None:
    """Why ``turn`` failed or was aborted, in one line (its recorded error's message), or ``None``."""
    error = turn.error if turn is not None else None
    if not error:
        return None
    message = error.get("message")
    return " ".join(str(message if message else error).split())
