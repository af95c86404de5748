"""Sessions made and changed over HTTP: a new chat with an agent, a fork, a title, archive and restore.

Nothing here deletes anything. The turn tree keeps every turn forever; a session is a named pointer
into it, and "deleting" one archives the pointer (``status = archived``: hidden from lists, every
turn kept, still addressable, restored with ``PATCH {"archived": false}``). A rename sets the
session's display ``title`` (``metadata.title``): its label is an address that queues, aliases and
other agents hold, so it never changes.

A new chat, and a fork made for an agent, is a keyed session of that agent (``web:<id>``; see
``nexus.server._owners``): messages sent to the agent with that key run in it, through the agent's
queue, so the chat is continuable at once (from the web UI, ``nexus send --session``, the API).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from nexus.ledger import AgentRow, NewSession, label_problem
from nexus.server._errors import ApiError
from nexus.server._label_path import SESSION
from nexus.server._off_loop import store_call
from nexus.server._openapi import answers
from nexus.server._owners import OWNER_KEY, TITLE_KEY, WEB_KEY_PREFIX, Owners
from nexus.server._schemas import SessionOut
from nexus.server._state import ServerState
from nexus.server._views import session_view

router = APIRouter(prefix="/v1", tags=["sessions"])

AGENT_FIELD = Field(default=None, min_length=1, max_length=64, description="a registered agent id")
TITLE_FIELD = Field(default=None, max_length=200, description="a display title (the label never changes)")


def _checked_title(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.strip():
        raise ValueError("the title is empty: send null to remove it")
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError("the title holds control characters")
    return value.strip()


class ForkRequest(BaseModel):
    """``POST /v1/sessions/{label}/fork``: the turn to continue from; for whom, or under which label."""

    model_config = ConfigDict(extra="forbid")
    turn_id: str = Field(min_length=1, max_length=64)
    label: str | None = Field(default=None, min_length=1, max_length=200)
    agent: str | None = AGENT_FIELD
    title: str | None = TITLE_FIELD

    @field_validator("label")
    @classmethod
    def _addressable(cls, value: str | None) -> str | None:
        problem = None if value is None else label_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return _checked_title(value)

    @model_validator(mode="after")
    def _label_or_agent(self) -> ForkRequest:
        if self.label is not None and self.agent is not None:
            raise ValueError("give 'label' or 'agent', not both: a fork for an agent gets a label its key reaches")
        return self


class NewSessionRequest(BaseModel):
    """``POST /v1/sessions``: a new, empty chat with an agent."""

    model_config = ConfigDict(extra="forbid")
    agent: str = Field(min_length=1, max_length=64, description="a registered agent id")
    title: str | None = TITLE_FIELD

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return _checked_title(value)


class SessionUpdate(BaseModel):
    """``PATCH /v1/sessions/{label}``: a new title (``null`` removes it) and/or archive (``true``) or restore."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = TITLE_FIELD
    archived: StrictBool | None = None  # "yes" is not a yes: 422

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return _checked_title(value)


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


def _agent(owners: Owners, agent_id: str) -> AgentRow:
    row = owners.agent(agent_id)
    if row is None:
        raise ApiError(422, "invalid_request", f"agent: unknown agent {agent_id!r}; register it with POST /v1/agents")
    return row


def _keyed(agent: AgentRow, title: str | None) -> dict[str, Any]:
    """A new keyed session's label, ``routing_key`` and ``metadata`` for ``agent`` (see the module docstring)."""
    from nexus.broker import session_label_for
    from nexus.ledger import new_ulid

    key = WEB_KEY_PREFIX + new_ulid().lower()
    metadata: dict[str, object] = {OWNER_KEY: agent.agent_id, **({TITLE_KEY: title} if title else {})}
    return {
        "label": session_label_for(agent.agent_id, agent.session_label, key),
        "routing_key": key,
        "metadata": metadata,
    }


@router.post(
    "/sessions",
    status_code=201,
    summary="A new, empty chat with an agent (a session its key reaches)",
    responses=answers(SessionOut, status=201),
)
async def create_session(request: Request, body: NewSessionRequest) -> Any:
    state = _state(request)
    owners = Owners(await store_call(state, state.store.list_agents))
    keyed = _keyed(_agent(owners, body.agent), body.title)
    return session_view(await state.ledger.sessions.create(NewSession(**keyed)), owners)


@router.post(
    f"{SESSION}/fork",
    status_code=201,
    summary="A new session at a turn of this one (for its agent, another agent, or under a label)",
    responses=answers(SessionOut, 404, 409, status=201),
)
async def fork_session(request: Request, label: str, body: ForkRequest) -> Any:
    """The ledger's one fork rule (``nexus.ledger.fork_session``, as ``nexus sessions fork`` and chat's ``/fork``):
    the turn must be in this session's history; a plain fork without a ``label`` is ``<session>-fork-N``."""
    from nexus.ledger import fork_session as fork_at

    state = _state(request)
    ledger = state.ledger
    session = await ledger.sessions.resolve(label)
    owners = Owners(await store_call(state, state.store.list_agents))
    if body.label is not None:
        agent = None
    elif body.agent is not None:
        agent = _agent(owners, body.agent)
    else:  # the source's agent, when it still is one
        agent = owners.agent(owners.owner_id(session.label, session.metadata))
    if agent is not None:  # the label the agent's key reaches (see the module docstring), not a numbered one
        fork = await fork_at(ledger, body.turn_id, of=session.label, **_keyed(agent, body.title))
    else:
        metadata: dict[str, object] | None = {TITLE_KEY: body.title} if body.title else None
        fork = await fork_at(ledger, body.turn_id, of=session.label, label=body.label, metadata=metadata)
    return session_view(fork, owners)


@router.patch(
    SESSION,
    summary="Retitle, archive or restore a session (its label and turns never change)",
    responses=answers(SessionOut, 404),
)
async def update_session(request: Request, label: str, body: SessionUpdate) -> Any:
    state = _state(request)
    sessions = state.ledger.sessions
    session = await sessions.resolve(label)
    status = None if body.archived is None else ("archived" if body.archived else "active")
    title: dict[str, object] | None = {TITLE_KEY: body.title} if "title" in body.model_fields_set else None
    await sessions.update(session.label, status=status, metadata=title)
    return session_view(await sessions.get(session.label), Owners(await store_call(state, state.store.list_agents)))


@router.delete(
    SESSION,
    status_code=204,
    summary="Archive a session: hidden from lists, every turn kept (restore: PATCH archived=false)",
    responses=answers(None, 404, status=204),
)
async def archive_session(request: Request, label: str) -> Response:
    sessions = _state(request).ledger.sessions
    session = await sessions.resolve(label)
    await sessions.update(session.label, status="archived")
    return Response(status_code=204)
