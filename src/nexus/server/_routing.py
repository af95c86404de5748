"""``POST /v1/route`` and the ``route`` of a message: smart routing over HTTP (docs/routing.md).

Decisions run on a worker thread (the router's work never holds the event loop) with the broker's
router, built on first use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from nexus.server._errors import ApiError
from nexus.server._openapi import answers
from nexus.server._schemas import RouteDecision
from nexus.server._state import ServerState

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["routing"])

RouteName = Literal["explicit", "smart", "hybrid"]
ROUTE_DESCRIPTION = (
    "smart: continue the past work of this agent the message fits (a fork of it) or start a new conversation; "
    "hybrid: the fork when confident, else this agent as addressed; explicit: as addressed"
)


class RouteRequest(BaseModel):
    """A task to route."""

    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=200_000)

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the task has no words (only whitespace); say what should be done")
        return value

    agent: str | None = Field(default=None, min_length=1, max_length=64, description="only this agent's past work")
    limit: int = Field(default=5, ge=1, le=50, description="alternatives to return")


def _routing(state: ServerState) -> Any:
    if state.broker is None:
        raise ApiError(409, "no_broker", "smart routing needs the broker to run in this server process (nexus serve)")
    return state.broker.routing


@router.post(
    "/route",
    summary="Where a task belongs in past work: the checkpoint to fork from, or new (recorded as a decision)",
    responses=answers(RouteDecision, 400, 404, 409),
)
async def route_task(request: Request, body: RouteRequest) -> Any:
    routing = _routing(request.app.state.nexus)
    with _route_errors():
        result = await asyncio.to_thread(lambda: routing.router.route(body.task, agent=body.agent, limit=body.limit))
    return result.to_json()


@contextmanager
def _route_errors() -> Iterator[None]:
    """A routing error in HTTP terms: an unknown agent 404, a wrong request 400, the server's own trouble (a
    ``[routing]`` model file that is not one, numpy missing) 500 with its reason, logged."""
    from nexus.routing import RouteRequestError, RoutingError, UnknownRouteAgent

    try:
        yield
    except UnknownRouteAgent as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except RouteRequestError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None
    except RoutingError as exc:
        log.error("smart routing failed: %s", exc)
        raise ApiError(500, "internal_error", f"smart routing failed on the server: {exc}") from None


async def routed(state: ServerState, message: Any, route: str) -> tuple[Any, dict[str, Any]]:
    """``message`` readdressed under ``route`` (decision recorded), and what to say about it in the answer."""
    from nexus.broker import BrokerError, plan_route

    routing = _routing(state)
    broker = state.broker
    assert broker is not None
    try:
        with _route_errors():
            plan = await asyncio.to_thread(lambda: plan_route(routing, message, route, broker.session_label))
    except BrokerError as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    decision = plan.decision
    about = {"mode": plan.mode, "arm": plan.arm, "agent": plan.message.to, "session": plan.message.session,
             "decision": None if decision is None else decision.to_json()}  # fmt: skip
    return plan.message, about
