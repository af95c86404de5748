"""``GET /v1/agent-messages`` (who asked whom, and the reply) and ``GET /v1/catalog`` (what an agent form offers)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from nexus.ledger import AgentMessageLog, AgentMessageRecord, StoredMessage, TurnNotFound
from nexus.llm import AssistantMessage, TextContent
from nexus.server._openapi import answers
from nexus.server._schemas import AgentMessageList, Catalog
from nexus.server._state import ServerState

router = APIRouter(prefix="/v1", tags=["agents"])


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


@router.get(
    "/agent-messages",
    summary="Agent-to-agent messages, newest first, each with the reply its turn gave",
    responses=answers(AgentMessageList),
)
async def agent_messages(
    request: Request,
    agent: str | None = Query(None, min_length=1, max_length=64, description="only those it sent or received"),
    limit: int = Query(100, ge=1, le=1000),
) -> Any:
    ledger = _state(request).ledger
    records = await AgentMessageLog(ledger.database).recent(agent=agent, limit=limit)
    outcomes: dict[str, tuple[str | None, str | None]] = {}
    for turn_id in dict.fromkeys(r.turn_id for r in records if r.turn_id):
        try:
            turn = await ledger.turns.get(turn_id)
            outcomes[turn_id] = (turn.status, reply_text(await ledger.turns.messages(turn_id)))
        except TurnNotFound:
            outcomes[turn_id] = (None, None)
    return {"messages": [_view(record, *outcomes.get(record.turn_id or "", (None, None))) for record in records]}


def reply_text(messages: list[StoredMessage]) -> str | None:
    """The turn's answer: the text of its last assistant message that has text (``None`` when none has)."""
    for stored in reversed(messages):
        message = stored.message
        if isinstance(message, AssistantMessage):
            text = "".join(block.text for block in message.content if isinstance(block, TextContent))
            if text.strip():
                return text
    return None


def _view(record: AgentMessageRecord, turn_status: str | None, reply: str | None) -> dict[str, Any]:
    return {
        "id": record.id,
        "from": record.from_agent,
        "to": record.to_agent,
        "session_label": record.session_label,
        "content": record.content,
        "created_at": record.created_at,
        "conversation_id": record.conversation_id,
        "in_reply_to": record.in_reply_to,
        "status": record.status,
        "turn_id": record.turn_id,
        "turn_status": turn_status,
        "reply": reply,
    }


@router.get(
    "/catalog", summary="Tool names, queue modes and catalog models an agent can use", responses=answers(Catalog)
)
def catalog() -> Any:
    from nexus.broker import QUEUE_MODES
    from nexus.config import BUILTIN_TOOL_NAMES
    from nexus.llm import list_models

    models = sorted({f"{m.provider}/{m.id}" for m in list_models()})
    return {"tools": list(BUILTIN_TOOL_NAMES), "queue_modes": list(QUEUE_MODES), "models": models}
