"""``POST /v1/agents/{id}/messages``, ``/abort`` and ``/interrupt``: talking to agents through the broker.

A message is accepted durably before the 202 goes out: through the broker when it drains in
this process (so steering and interrupts reach the running turn), otherwise straight into the
durable queue for whichever process drains this ``$NEXUS_HOME``. Sending is idempotent on the
message ``id``: a retry answers with the first queue item and ``duplicate: true``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from nexus.broker import MAX_CONTENT_CHARS, MAX_KEY_CHARS
from nexus.server._deliver import DELIVER_DESCRIPTION, DeliverTo, delivery_target, send_and_deliver
from nexus.server._errors import ApiError
from nexus.server._off_loop import store_call
from nexus.server._openapi import answers
from nexus.server._routing import ROUTE_DESCRIPTION, RouteName, routed
from nexus.server._schemas import Aborted, Dropped, Receipt
from nexus.server._state import ServerState

if TYPE_CHECKING:
    from nexus.broker import SendReceipt
    from nexus.ledger import AgentRow

router = APIRouter(prefix="/v1", tags=["messages"])


SESSION_DESCRIPTION = (
    "a session key (e.g. dm:telegram:42): the message goes to the agent's per-sender session "
    "of that key, mapped to a ledger label as for inbound chat messages; omitted: the agent's own session"
)


class _AgentMessageBody(BaseModel):
    """What every message to an agent carries (``from`` defaults to ``user``), checked alike on each route."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    id: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
        description="makes sending idempotent (no control characters, as `nexus send --id`)",
    )  # fmt: skip
    from_: str | None = Field(default=None, alias="from", min_length=1, max_length=64)
    session: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_CHARS, description=SESSION_DESCRIPTION)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return _content(value)

    @field_validator("session")
    @classmethod
    def _valid_key(cls, value: str | None) -> str | None:
        return None if value is None else _session_key(value)


class MessageRequest(_AgentMessageBody):
    """A message to an agent (``mode`` defaults to the agent's queue mode)."""

    mode: str | None = Field(
        default=None, max_length=40, description="steer, followup, collect, steer-backlog, queue, interrupt"
    )
    deliver: DeliverTo | str | None = Field(default=None, description=DELIVER_DESCRIPTION)
    conversation_id: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
        description="carried by every message this one causes (delegations, replies): `nexus send --wait` "
        "waits for all of them",
    )  # fmt: skip
    route: RouteName | None = Field(default=None, description=ROUTE_DESCRIPTION)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        from nexus.broker import parse_mode

        return None if value is None else parse_mode(value)  # QueueSettingsError is a ValueError: 422


class InterruptRequest(_AgentMessageBody):
    """A message that aborts the run of its session (``session``: that key's; else the agent's own), then runs
    with that session's backlog."""


def _session_key(value: str) -> str:
    """``value`` if it is a usable session key, else ValueError saying why (a 422 naming ``session``)."""
    from nexus.broker import BrokerError, check_session_key

    try:
        check_session_key(value)
    except BrokerError as exc:
        raise ValueError(str(exc)) from None
    return value


def _content(value: str) -> str:
    """The content as sent, NUL characters included (every door takes them: the ledger keeps a message as
    JSON, which escapes them, on PostgreSQL too); one of only white space and NULs is refused."""
    if not value.replace("\x00", "").strip():
        raise ValueError("the message has no content (only whitespace)")
    return value


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


async def _known(state: ServerState, agent_id: str) -> bool:
    """Registered? The live broker's memory answers first (no query on the hot path), then the store."""
    if state.broker is not None and state.broker.get_agent(agent_id) is not None:
        return True
    return await _stored(state, agent_id) is not None


async def _stored(state: ServerState, agent_id: str) -> AgentRow | None:
    """The registry's row of ``agent_id`` (off the event loop on PostgreSQL)."""
    return await store_call(state, lambda: state.store.get_agent(agent_id))


async def _check_names(state: ServerState, agent_id: str, sender: str) -> AgentRow:
    """Unknown target → 404; an unknown sender or a message to oneself → 400, before anything is stored."""
    row = await _stored(state, agent_id)
    if row is None:  # the store decides: DELETE /v1/agents/{id} removes it there
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    if sender not in ("user", "system") and not await _known(state, sender):
        raise ApiError(400, "invalid_request", f"'from' {sender!r} is not a registered agent (or 'user'/'system')")
    if sender == agent_id:
        raise ApiError(400, "invalid_request", f"agent {agent_id!r} cannot send a message to itself")
    return row


async def ensure_in_broker(state: ServerState, agent_id: str) -> None:
    """Register with the live broker an agent it does not know yet (added by another process or route)."""
    from nexus.broker import stored_agent

    broker = state.broker
    if broker is None or broker.get_agent(agent_id) is not None:
        return
    row = await _stored(state, agent_id)
    if row is not None and broker.get_agent(agent_id) is None:
        identity, spec = stored_agent(row)
        try:
            broker.register_agent(identity, spec=spec, stored=True)
        except ValueError as exc:  # stored by another process, unusable here (its model, its session): say why
            raise ApiError(409, "conflict", f"agent {agent_id!r} cannot run in this server: {exc}") from None


async def accept_message(
    state: ServerState,
    agent_id: str,
    content: str,
    *,
    mode: str | None,
    message_id: str | None,
    sender: str,
    deliver: DeliverTo | str | None = None,
    session: str | None = None,
    conversation_id: str | None = None,
) -> dict[str, Any]:
    """Accept one message durably (the broker's ``send`` when it runs here) and say which queue item holds it.

    With ``deliver``, the reply of the run that consumes it also goes to that adapter target;
    ``session``: the key of the agent's per-sender session it goes to (``None``: its own)."""
    answer, _ = await accept_with_receipt(
        state, agent_id, content, mode=mode, message_id=message_id, sender=sender, deliver=deliver, session=session,
        conversation_id=conversation_id,
    )  # fmt: skip
    return answer


async def accept_with_receipt(
    state: ServerState,
    agent_id: str,
    content: str,
    *,
    mode: str | None,
    message_id: str | None,
    sender: str,
    deliver: DeliverTo | str | None = None,
    session: str | None = None,
    conversation_id: str | None = None,
) -> tuple[dict[str, Any], SendReceipt | None]:
    """:func:`accept_message`, with the broker's receipt (``None``: queued for the process that drains)."""
    from nexus.broker import AgentMessage, new_message_id

    row = await _check_names(state, agent_id, sender)
    target = None if deliver is None else delivery_target(state, deliver)
    message = AgentMessage(
        id=message_id or new_message_id(), from_=sender, to=agent_id, content=content, session=session,
        conversation_id=conversation_id,
    )  # fmt: skip
    if state.broker is not None:
        await ensure_in_broker(state, agent_id)
        delivering = None
        if target is not None:
            receipt, delivering = await send_and_deliver(state, message, mode, target)
        else:
            receipt = await state.broker.send(message, mode)
        answer = {
            "message_id": receipt.message_id, "queue_item_id": receipt.queue_item_id,
            "duplicate": receipt.duplicate, "steered": receipt.steered, "pushed_out": list(receipt.pushed_out),
        }  # fmt: skip
        return (answer if target is None else {**answer, "deliver": delivering}), receipt
    return await store_call(state, lambda: _accept_for_other_process(state, row, message, mode)), None


def _accept_for_other_process(state: ServerState, row: AgentRow, message: Any, mode: str | None) -> dict[str, Any]:
    from nexus.broker import session_label_for
    from nexus.ledger import AcceptRequest

    message.timestamp = int(time.time() * 1000)
    label = session_label_for(message.to, row.session_label, message.session)
    request = AcceptRequest(
        message.to, label, message.id, message.from_, message.to_json(), mode or "followup",
        state.store.get_agent(message.from_) is not None,
        session_key=message.session if label != row.session_label else None,
    )  # fmt: skip
    try:
        item, created = state.store.accept_many([request])[0]
    except ValueError as exc:  # the per-sender session's label is taken by another session
        raise ApiError(409, "conflict", f"message {message.id!r} was not queued: {exc}") from None
    answer = {"message_id": message.id, "queue_item_id": item.id, "duplicate": not created, "steered": False}
    return {**answer, "pushed_out": []}  # the cap applies when the draining process takes the message


@router.post(
    "/agents/{agent_id}/messages",
    status_code=202,
    summary="Send a message to an agent: accepted durably, run by the broker (idempotent on id)",
    responses=answers(Receipt, 400, 404, 409, 429, status=202),
)
async def send_message(request: Request, agent_id: str, body: MessageRequest) -> Any:
    state = _state(request)
    if body.route is None:
        return await accept_message(
            state, agent_id, body.content, mode=body.mode, message_id=body.id, sender=body.from_ or "user",
            deliver=body.deliver, session=body.session, conversation_id=body.conversation_id,
        )  # fmt: skip
    from nexus.broker import AgentMessage, new_message_id

    await _check_names(state, agent_id, body.from_ or "user")
    message = AgentMessage(id=body.id or new_message_id(), from_=body.from_ or "user", to=agent_id,
                           content=body.content, session=body.session,
                           conversation_id=body.conversation_id)  # fmt: skip
    message, about = await routed(state, message, body.route)
    answer = await accept_message(
        state, message.to, message.content, mode=body.mode, message_id=message.id, sender=message.from_,
        deliver=body.deliver, session=message.session, conversation_id=message.conversation_id,
    )  # fmt: skip
    return {**answer, "route": about}


@router.post(
    "/agents/{agent_id}/interrupt",
    status_code=202,
    summary="Abort the run of the message's session (the agent's own unless `session` names one), then run it",
    responses=answers(Receipt, 400, 404, 409, 429, status=202),
)
async def interrupt_agent(request: Request, agent_id: str, body: InterruptRequest) -> Any:
    return await accept_message(
        _state(request), agent_id, body.content, mode="interrupt", message_id=body.id, sender=body.from_ or "user",
        session=body.session,
    )  # fmt: skip


@router.post(
    "/agents/{agent_id}/abort",
    summary="Abort the agent's current runs, or with ?session=KEY that session's (kept as aborted turns)",
    responses=answers(Aborted, 404, 409),
)
async def abort_agent(request: Request, agent_id: str, session: str | None = None) -> Any:
    state = _state(request)
    if session is not None:
        try:
            _session_key(session)
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"session: {exc}") from None
    if await _stored(state, agent_id) is None:
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    if state.broker is None:
        raise ApiError(409, "no_broker", "no broker runs in this server process: nothing to abort here")
    await ensure_in_broker(state, agent_id)
    return {"agent_id": agent_id, "aborted": state.broker.abort(agent_id, session)}


@router.delete(
    "/agents/{agent_id}/queue",
    summary="Drop every waiting message of the agent (recorded as dropped)",
    responses=answers(Dropped, 404, 409),
)
async def clear_queue(request: Request, agent_id: str) -> Any:
    state = _state(request)
    if await _stored(state, agent_id) is None:
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    if state.broker is not None:
        await ensure_in_broker(state, agent_id)
        return {"agent_id": agent_id, "dropped": await state.broker.clear_queue(agent_id)}
    return {"agent_id": agent_id, "dropped": await store_call(state, lambda: _drop_waiting(state, agent_id))}


def _drop_waiting(state: ServerState, agent_id: str) -> int:
    waiting = [item.id for item in state.store.items(agent_id=agent_id, statuses=("queued",))]
    state.store.drop(waiting, "cleared over HTTP (DELETE /v1/agents/{id}/queue)")
    return len(waiting)
