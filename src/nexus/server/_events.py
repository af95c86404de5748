"""``GET /v1/sessions/{label}/events``: a session's ``StreamEvent``s as Server-Sent Events.

The response is a small ASGI app of its own rather than a ``StreamingResponse``: it must watch the
client's disconnect (uvicorn drops writes to a closed socket silently, so only ``receive`` tells)
while it waits for events, and end when the hub closes at shutdown. Each stream costs one waiting
task (the writer) and one watching ``receive``; the writer only wakes when its session publishes.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Header, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from nexus.server._errors import ApiError
from nexus.server._event_hub import EventHub, HubError, Subscription
from nexus.server._label_path import SESSION
from nexus.server._openapi import answers
from nexus.server._state import ServerState

router = APIRouter(prefix="/v1", tags=["events"])

RETRY_MS = 2000
"""Tells EventSource clients to reconnect after 2 s when the stream drops."""

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class EventStream(Response):
    """An ASGI response that sends a subscription's frames until the client leaves or the hub closes."""

    media_type = "text/event-stream"

    def __init__(self, subscription: Subscription) -> None:
        # Not Response.__init__: there is no body to measure; the headers are sent as SSE_HEADERS.
        self.subscription = subscription
        self.status_code = 200
        self.background = None
        self.raw_headers = list(SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        gone = False

        async def watch() -> None:
            # Readers wait on one future shared by the whole session (cheap fan-out), so the
            # client leaving cannot be one more thing to wait for: it cancels the stream instead.
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            task.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode(), "more_body": True})
            while (frames := await self.subscription.next()) is not None:
                await send({"type": "http.response.body", "body": frames, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # our own cancel: the client left, the response is over
        finally:
            watcher.cancel()
            self.subscription.close()


def _hub(request: Request) -> EventHub:
    state: ServerState = request.app.state.nexus
    assert state.events is not None, "create_app sets the hub"
    return state.events


def _parse_last_event_id(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = -1
    if parsed < 0 or parsed >= 2**63:
        raise ApiError(
            400, "invalid_request", f"Last-Event-ID must be an event id this stream sent (an integer), got {value!r}"
        )
    return parsed


@router.get(
    f"{SESSION}/events",
    summary="The session's StreamEvents as Server-Sent Events (resume with Last-Event-ID)",
    response_class=EventStream,
    status_code=200,
    responses={
        **answers(None, 400, 404, media="text/event-stream"),
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": "an endless SSE stream"},
    },
)
async def session_events(
    request: Request, label: str, last_event_id: str | None = Header(default=None, alias="Last-Event-ID")
) -> EventStream:
    """Event name = the StreamEvent type, ``id`` = a growing integer, data = the StreamEvent as JSON.

    Without ``Last-Event-ID`` the stream starts with the next event. With it, every retained event
    after that id comes first; if some were already dropped (or the id is not from this server
    process) the first event is ``reset`` and the stream continues live. Idle streams get a
    ``: keepalive`` comment every ``[server] events_heartbeat_seconds``.
    """
    state: ServerState = request.app.state.nexus
    session = await state.ledger.sessions.resolve(label)
    resume = _parse_last_event_id(last_event_id)
    try:
        if state.relay is not None:  # PostgreSQL: ids are the shared log's, older events come from it
            subscription = await state.relay.subscribe(session.label, resume)
        else:
            subscription = _hub(request).subscribe(session.label, resume)
    except HubError as exc:  # all slots taken (HubFull), or the server is shutting down
        raise ApiError(503, "unavailable", str(exc)) from None
    return EventStream(subscription)
