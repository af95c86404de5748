"""``/v1/sessions``: list, show, history, turn tree, fork, export and import (pi JSONL)."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response

from nexus.ledger import Ledger, PiFormatError, SessionQuery, label_problem
from nexus.server._errors import ApiError
from nexus.server._label_path import SESSION
from nexus.server._openapi import answers
from nexus.server._owners import Owners
from nexus.server._schemas import History, ImportResult, SessionDetail, SessionList, Tree, TurnDetail
from nexus.server._state import ServerState
from nexus.server._views import message_view, session_view, tool_call_view, turn_preview, turn_view

router = APIRouter(prefix="/v1", tags=["sessions"])


class JsonLinesResponse(Response):
    """A pi session file: one JSON document per line."""

    media_type = "application/x-ndjson"


MAX_TREE_TURNS = 5000


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


@router.get("/sessions", summary="Sessions, most recently updated first", responses=answers(SessionList))
async def list_sessions(
    request: Request,
    include_archived: bool = False,
    limit: int = Query(200, ge=1, le=10_000),
    q: str | None = Query(None, max_length=200, description="sessions whose label, title, agent or channel has it"),
) -> Any:
    state = _state(request)
    query = SessionQuery(status=None if include_archived else "active", limit=None if q else limit)
    sessions = await state.ledger.sessions.list(query)
    owners = Owners(await state.ledger.agents.list())
    views = (session_view(s, owners) for s in sessions)
    if q:
        needle = q.casefold()
        views = (v for v in views if any(needle in str(v[k] or "").casefold() for k in SEARCHED))
    return {"sessions": list(itertools.islice(views, limit))}


SEARCHED = ("label", "title", "agent", "channel", "session_key")
"""The fields ``GET /v1/sessions?q=`` looks in."""


@router.get(SESSION, summary="One session with its head turn and aliases", responses=answers(SessionDetail, 404))
async def show_session(request: Request, label: str) -> Any:
    ledger = _state(request).ledger
    session = await ledger.sessions.resolve(label)
    head = await ledger.turns.get(session.thread_id) if session.thread_id else None
    return {
        **session_view(session, Owners(await ledger.agents.list())),
        "aliases": await ledger.sessions.aliases(session.label),
        "head": None if head is None else turn_view(head),
        "turns": 0 if head is None else head.depth + 1,
    }


@router.get(
    f"{SESSION}/history",
    summary="The session's turns, root first, with their messages",
    responses=answers(History, 404),
)
async def session_history(request: Request, label: str) -> Any:
    async def read(ledger: Ledger) -> Any:
        session = await ledger.sessions.resolve(label)
        turns = await ledger.turns.path(session.label)
        sent = await _deliveries(ledger, [t.id for t in turns])
        return {
            "label": session.label,
            "turns": [
                {
                    **turn_view(t),
                    "messages": [message_view(m) for m in await ledger.turns.messages(t.id)],
                    "deliveries": sent(t.id),
                }
                for t in turns
            ],
        }

    return await _state(request).ledger.off_loop(read)


@router.get(
    f"{SESSION}/tree",
    summary="Every turn of the tree the session is in, forks included",
    responses=answers(Tree, 404),
)
async def session_tree(request: Request, label: str) -> Any:
    async def read(ledger: Ledger) -> Any:
        session = await ledger.sessions.resolve(label)
        turns, truncated = await ledger.turns.tree(session.label, limit=MAX_TREE_TURNS)
        heads: dict[str, list[str]] = {}
        for other in await ledger.sessions.list(SessionQuery(status="active")):
            if other.thread_id:
                heads.setdefault(other.thread_id, []).append(other.label)
        path = {t.id for t in await ledger.turns.path(session.label)}
        sent = await _deliveries(ledger, [t.id for t in turns])
        return {
            "label": session.label,
            "head_turn_id": session.thread_id,
            "truncated": truncated,
            "turns": [
                {
                    **turn_view(t),
                    "on_path": t.id in path,
                    "heads_of": heads.get(t.id, []),
                    "deliveries": sent(t.id),
                    "preview": turn_preview(await ledger.turns.messages(t.id)),
                }
                for t in turns
            ],
        }

    return await _state(request).ledger.off_loop(read)


@router.get(
    "/turns/{turn_id}",
    summary="One turn: its messages, tool calls, tokens, cost and where its reply went",
    responses=answers(TurnDetail, 404),
)
async def show_turn(request: Request, turn_id: str) -> Any:
    ledger = _state(request).ledger
    turn = await ledger.turns.get(turn_id)
    return {
        **turn_view(turn),
        "messages": [message_view(m) for m in await ledger.turns.messages(turn.id)],
        "tool_calls": [tool_call_view(c) for c in await ledger.turns.tool_calls(turn.id)],
        "deliveries": (await _deliveries(ledger, [turn.id]))(turn.id),
    }


@router.get(
    f"{SESSION}/export",
    summary="The session as a pi-coding-agent session file (JSONL)",
    response_class=JsonLinesResponse,
    responses=answers(None, 404, media=JsonLinesResponse.media_type),
)
async def export_session(request: Request, label: str) -> JsonLinesResponse:
    async def read(ledger: Ledger) -> tuple[str, str]:
        session = await ledger.sessions.resolve(label)
        return session.label, await ledger.pi.export_pi(session.label)

    found, text = await _state(request).ledger.off_loop(read)
    return JsonLinesResponse(
        text.encode("utf-8"),
        headers={"content-disposition": f'attachment; filename="{_safe_filename(found)}.jsonl"'},
    )


@router.post(
    "/sessions/import",
    status_code=201,
    summary="Import a pi-coding-agent session file (JSONL body)",
    responses=answers(ImportResult, 400, 409, status=201),
)
async def import_session(
    request: Request,
    body: Annotated[bytes, Body(media_type="application/x-ndjson")] = b"",
    label: str | None = Query(None, min_length=1, max_length=200),
) -> Any:
    problem = None if label is None else label_problem(label)
    if problem is not None:
        raise ApiError(422, "invalid_request", f"label: {problem}")
    if not body.strip():
        raise ApiError(400, "invalid_request", "the body is empty: send the JSONL session file as the request body")
    fd, name = tempfile.mkstemp(prefix="nexus-import-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        result = await _state(request).ledger.off_loop(lambda ledger: ledger.pi.import_pi(name, label))
    except PiFormatError as exc:  # its message names the server's temporary file: name the request body instead
        raise ApiError(400, "invalid_request", str(exc).replace(name, "the request body")) from None
    finally:
        os.unlink(name)
    return {
        "label": result.session_label,
        "fork_labels": result.fork_labels,
        "turns": result.turns,
        "messages": result.messages,
        "compactions": result.compactions,
        "unknown_entries": result.unknown_entries(),
    }


async def _deliveries(ledger: Ledger, turn_ids: list[str]) -> Callable[[str], list[dict[str, Any]]]:
    """Where the replies of these turns went (one query): turn id → its ``deliveries`` rows as JSON."""
    found = await ledger.deliveries.for_turns(turn_ids)
    return lambda turn_id: [record.to_json() for record in found.get(turn_id, [])]


def _safe_filename(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:100] or "session"
