"""The OpenAI-compatible facade: ``GET /v1/models`` and ``POST /v1/chat/completions`` (model = agent id).

Any OpenAI client talks to an agent: ``base_url=http://host:port/v1``, ``model="<agent id>"``.
Only the new part of the conversation is sent to the agent — the user message(s) after the last
assistant message — because the agent's session already holds the rest (its history, its tools'
results). The session is the agent's own unless the request names another (docs/server.md).
Streaming answers ``chat.completion.chunk`` events and ``data: [DONE]``; ``usage`` is filled from
the turn the ledger wrote.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from nexus.broker import MAX_CONTENT_CHARS
from nexus.server._chat_run import ChatTurn, dropped, finished, refusal, start_chat_turn, texts
from nexus.server._chat_sessions import claim_chat_session
from nexus.server._errors import ApiError, error_json
from nexus.server._off_loop import store_call
from nexus.server._openai_params import FacadeRoute, refuse_unsupported, with_code
from nexus.server._openapi import answers
from nexus.server._schemas import ChatCompletion, ModelList
from nexus.server._state import ServerState

if TYPE_CHECKING:
    from nexus.engine import AgentResult

router = APIRouter(prefix="/v1", tags=["openai"], route_class=FacadeRoute)

HEARTBEAT_S = 15.0
"""A silent stream sends an SSE comment this often, so proxies keep it open."""
_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")
_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_BAD_REQUEST = (
    "invalid_request: an option the agent cannot honour, a field of the wrong type or value (param names it, as "
    "OpenAI's errors do), or no new user message"
)
LENGTH_STOPS = ("length", "max_tokens")
"""A turn's ``stop_reason`` when the model stopped at its token limit (OpenAI's ``finish_reason: length``)."""


class ContentPart(BaseModel):
    """One part of a message's content; text parts are used, others are refused."""

    model_config = ConfigDict(extra="allow", strict=True)  # OpenAI's types: "stream": "yes" is not true
    type: str = Field(max_length=40)
    text: str | None = Field(default=None, max_length=MAX_CONTENT_CHARS)


class ChatMessage(BaseModel):
    """A message of the conversation the client holds (OpenAI's shape; tool fields accepted and ignored)."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds OpenAI's usage-only last chunk."""

    model_config = ConfigDict(extra="allow", strict=True)
    include_usage: bool = False


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``: what the facade acts on; other options per ``_openai_params``.

    The agent's spec decides the model, tools and instructions: the client only talks. Options it
    cannot honour are refused (400 with ``param``); sampling hints are accepted and ignored. Strict
    types, as OpenAI's: lax parsing took ``"stream": "yes"`` as true and ``"max_tokens": "5"`` as 5.
    """

    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(min_length=1, max_length=64)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(default=None, max_length=64)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=1_000_000)


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


def _text(message: ChatMessage, at: int) -> str:
    """The text of ``messages[at]``; 400 naming the part that is not text (or a text part without its text)."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for n, part in enumerate(message.content):
        param = f"messages[{at}].content[{n}]"
        if part.type != "text":
            raise ApiError(
                400, "invalid_request", f"{param}: content part type {part.type!r} is not supported (text only)",
                param=f"{param}.type", code="invalid_value",
            )  # fmt: skip
        if part.text is None:
            raise ApiError(
                400, "invalid_request", f"{param}: a text part needs its text", param=f"{param}.text",
                code="missing_required_parameter",
            )  # fmt: skip
        texts.append(part.text)
    return "\n".join(texts)


def new_prompt(messages: list[ChatMessage]) -> str:
    """The user message(s) after the last assistant message, joined: what the agent has not seen yet."""
    last_assistant = max((n for n, m in enumerate(messages) if m.role == "assistant"), default=-1)
    fresh = [_text(m, n) for n, m in enumerate(messages) if n > last_assistant and m.role == "user"]
    prompt = "\n\n".join(text for text in fresh if text.strip())
    if not prompt:
        raise ApiError(400, "invalid_request", "no user message after the last assistant message: nothing to send")
    if len(prompt) > MAX_CONTENT_CHARS:
        raise ApiError(
            413, "too_large", f"the new messages are {len(prompt):,} characters; the limit is {MAX_CONTENT_CHARS:,}"
        )
    return prompt


def choose_session(agent_session: str, header: str | None, user: str | None) -> str:
    """``X-Nexus-Session`` names the session; else ``user`` picks ``<agent session>:user:<user>``; else the agent's."""
    if header is not None:
        if not _SESSION_RE.match(header) or ".." in header:
            raise ApiError(400, "invalid_request", "X-Nexus-Session: letters, digits and . _ : @ - only (1-200)")
        return header
    if user is not None:  # "" went to the agent's own session: the client meant a user and named none
        if not _USER_RE.match(user):
            raise ApiError(
                400, "invalid_request", f"user: letters, digits and . _ @ - only (1-64), got {user!r:.80}",
                param="user", code="invalid_value",
            )  # fmt: skip
        return f"{agent_session}:user:{user}"
    return agent_session


@router.get(
    "/models",
    summary="OpenAI-compatible: one model per registered agent (the model id is the agent id)",
    responses=answers(ModelList),
)
def list_models(request: Request) -> Any:
    rows = _state(request).store.list_agents()
    return {
        "object": "list",
        "data": [
            {"id": row.agent_id, "object": "model", "created": row.created_at // 1000, "owned_by": "nexus"}
            for row in rows
        ],
    }


@router.post(
    "/chat/completions",
    summary="OpenAI-compatible chat completion: model = agent id; streamed or not",
    responses={
        **answers(ChatCompletion, 400, 404, 409, 413, 429, 502),
        200: {"model": ChatCompletion, "content": {"text/event-stream": {"schema": {"type": "string"}}}},
        400: {**answers(None, 400)[400], "description": _BAD_REQUEST},
    },
)
async def chat_completions(
    request: Request, body: ChatRequest, x_nexus_session: str | None = Header(default=None, max_length=200)
) -> Any:
    from nexus.ledger import new_ulid

    refuse_unsupported(body.model_extra or {})
    if body.stream_options is not None and not body.stream:
        raise ApiError(
            400, "invalid_request", "stream_options is only allowed with stream: true", param="stream_options",
            code="invalid_value",
        )  # fmt: skip
    state = _state(request)
    agent = await store_call(state, lambda: state.store.get_agent(body.model))
    if agent is None:
        raise ApiError(
            404, "model_not_found", f"the model {body.model!r} does not exist: use an agent id (GET /v1/models)",
            param="model", code="model_not_found",
        )  # fmt: skip
    prompt = new_prompt(body.messages)
    session = await claim_chat_session(state, agent, choose_session(agent.session_label, x_nexus_session, body.user))
    completion_id = f"chatcmpl-{new_ulid().lower()}"
    turn = await start_chat_turn(state, agent, session, prompt, completion_id, max_tokens=_max_tokens(body))
    headers = {"x-nexus-session": turn.session_label}
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        chunks = _chunks(state, turn, completion_id, body.model, include_usage=include_usage)
        return StreamingResponse(
            chunks, media_type="text/event-stream", headers={**headers, "cache-control": "no-cache"}
        )
    result = await _succeeded(turn, *await finished(turn))
    counts, finish = await turn_facts(state, result.turn_id)
    body_out = {
        "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": body.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply},
                     "finish_reason": finish, "logprobs": None}],
        "usage": counts, "system_fingerprint": None,
    }  # fmt: skip
    return JSONResponse(body_out, headers={**headers, "x-nexus-turn-id": result.turn_id or ""})


def _max_tokens(body: ChatRequest) -> int | None:
    """The client's output limit (``max_completion_tokens``, or the older ``max_tokens``; not both)."""
    if body.max_tokens is not None and body.max_completion_tokens is not None:
        raise ApiError(
            400, "invalid_request", "give max_completion_tokens or max_tokens, not both", param="max_tokens",
            code="unsupported_value",
        )  # fmt: skip
    return body.max_completion_tokens or body.max_tokens


def failure(result: AgentResult | None, why: str | None) -> str | None:
    """Why the completion failed (its turn failed, or it never ran), or ``None``."""
    if result is None:
        return why or "no reason given"
    if result.status == "failed":
        return (result.error.message if result.error is not None else None) or "no reason given"
    return None


async def _succeeded(turn: ChatTurn, result: AgentResult | None, why: str | None) -> AgentResult:
    """The finished turn's result; else the error to answer (a failed turn, one never run, one aborted)."""
    if result is None:
        gone = await dropped(turn)
        if gone is not None:
            raise gone
    error = failure(result, why)
    if error is not None or result is None:
        raise ApiError(502, "upstream_error", f"the agent's turn failed: {error}")
    cut = await refusal(turn, result)
    if cut is not None:
        raise cut
    return result


async def turn_facts(state: ServerState, turn_id: str | None) -> tuple[dict[str, int], str]:
    """The turn's token counts as the ledger wrote them (zeros when no turn was written) and its
    ``finish_reason``: ``length`` when the model stopped at its token limit, else ``stop``."""
    prompt_tokens = completion_tokens = 0
    finish = "stop"
    if turn_id is not None:
        turn = await state.ledger.turns.get(turn_id)
        prompt_tokens, completion_tokens = turn.input_tokens or 0, turn.output_tokens or 0
        finish = "length" if turn.stop_reason in LENGTH_STOPS else "stop"
    counts = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
              "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
    return counts, finish


def _chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
    body = {
        "id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra,
    }  # fmt: skip
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


async def _chunks(
    state: ServerState, turn: ChatTurn, completion_id: str, model: str, *, include_usage: bool
) -> AsyncIterator[bytes]:
    """The SSE body: role, text deltas (heartbeat comments while silent), the finish, usage, ``[DONE]``.

    A turn that did not finish ends with an ``error`` event (the non-streamed answer's error body)
    instead of the finish, then ``[DONE]``: the stream was ended by the server, not cut."""
    yield _chunk(completion_id, model, {"role": "assistant", "content": ""}, None)
    try:
        async for delta in texts(turn, HEARTBEAT_S):
            if delta is None:
                yield b": keep-alive\n\n"
            elif delta:
                yield _chunk(completion_id, model, {"content": delta}, None)
        result = await _succeeded(turn, *await finished(turn))
    except ApiError as exc:
        failed = with_code(exc)
        yield b"data: " + error_json(failed.error_type, failed.message, param=failed.param, code=failed.code) + b"\n\n"
        yield b"data: [DONE]\n\n"
        return
    counts, finish = await turn_facts(state, result.turn_id)
    if include_usage:
        yield _chunk(completion_id, model, {}, finish)
        done = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [], "usage": counts}  # fmt: skip
        yield f"data: {json.dumps(done, separators=(',', ':'))}\n\n".encode()
    else:
        yield _chunk(completion_id, model, {}, finish, usage=counts)
    yield b"data: [DONE]\n\n"
