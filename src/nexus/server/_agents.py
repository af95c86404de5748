"""``/v1/agents``: the broker's registry and queues over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from nexus.server._errors import ApiError
from nexus.server._off_loop import store_call
from nexus.server._openapi import answers
from nexus.server._schemas import AgentList, AgentOut, QueueList
from nexus.server._state import ServerState
from nexus.server._views import agent_loads, agent_view, queue_item_views

router = APIRouter(prefix="/v1", tags=["agents"])


class AgentRequest(BaseModel):
    """``POST /v1/agents``: register a named agent, or update one (fields left out keep their values; ``model``,
    ``tools`` or ``system_prompt`` given as null go back to the default: the run's model, every tool, none)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64)
    role: Literal["manager", "worker"] = "worker"
    model: str | None = Field(default=None, min_length=3, max_length=200)
    session_label: str | None = Field(default=None, min_length=1, max_length=200)
    tools: list[str] | None = Field(default=None, max_length=100)
    system_prompt: str | None = Field(default=None, max_length=100_000)

    @field_validator("id")
    @classmethod
    def _usable_id(cls, value: str) -> str:
        from nexus.config import check_agent_ids

        check_agent_ids({value: None})  # type: ignore[dict-item]  # only the ids are read
        return value

    @field_validator("model")
    @classmethod
    def _model_ref(cls, value: str | None) -> str | None:
        if value is not None:
            provider, sep, model_id = value.partition("/")
            if not sep or not provider.strip() or not model_id.strip():
                raise ValueError(f"expected 'provider/model' (e.g. 'openai/gpt-4o-mini'), got {value!r}")
        return value

    @field_validator("session_label")
    @classmethod
    def _addressable_label(cls, value: str | None) -> str | None:
        from nexus.ledger import label_problem

        problem = None if value is None else label_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        from nexus.config import BUILTIN_TOOL_NAMES, unknown_tool_entries

        problems = unknown_tool_entries(value or [], BUILTIN_TOOL_NAMES, mcp_servers=None)  # MCP: any server
        if problems:
            raise ValueError("; ".join(problems))
        return value


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.nexus
    return state


def _loads(state: ServerState) -> Callable[[str], dict[str, Any]]:
    return agent_loads(state.store.items(statuses=("queued", "processing")), state.broker)


@router.get(
    "/agents", summary="Every registered agent with its live state and queue depth", responses=answers(AgentList)
)
def list_agents(request: Request) -> Any:
    state = _state(request)
    load = _loads(state)
    return {"agents": [agent_view(row, **load(row.agent_id)) for row in state.store.list_agents()]}


@router.post(
    "/agents", status_code=201, summary="Register (or update) an agent", responses=answers(AgentOut, 409, status=201)
)
async def register_agent(request: Request, body: AgentRequest) -> Any:
    state = _state(request)
    given = body.model_fields_set  # an update keeps what the request leaves out
    spec = body.model_dump(include={"model", "tools", "system_prompt"} & given)  # null: back to the default
    role = body.role if "role" in given else None
    if spec.get("model") is not None:
        _check_model(state, spec["model"])
    from nexus.ledger import AgentSessionTakenError

    try:
        row = await store_call(
            state, lambda: state.store.add_agent(body.id, role=role, session_label=body.session_label, spec=spec)
        )
    except AgentSessionTakenError as exc:
        raise ApiError(409, "conflict", f"session_label: {exc}") from None
    if state.broker is not None:  # drains here: it runs the new (or updated) agent from now on
        from nexus.broker import stored_agent

        identity, stored = stored_agent(row)
        state.broker.register_agent(identity, spec=stored, stored=True)  # the row above is the agent as saved
    items = await store_call(state, lambda: state.store.items(agent_id=body.id, statuses=("queued", "processing")))
    return agent_view(row, **agent_loads(items, state.broker)(body.id))  # an update of a busy agent: as it is


def _check_model(state: ServerState, ref: str) -> None:
    """422 for a model no run could reach: the check ``nexus agents add --model`` makes (a missing key is fine).

    The runtime's check (:meth:`Runtime.model_problem`, the one ``AgentBroker.register_agent`` makes);
    without one, against the default configuration.
    """
    if state.runtime is not None:
        problem = state.runtime.model_problem(ref)
    else:
        from nexus.config import NexusConfig
        from nexus.engine import unreachable_model_problem

        problem = unreachable_model_problem(NexusConfig(), ref)
    if problem is not None:
        raise ApiError(422, "invalid_request", f"model: {problem}")


@router.get("/agents/{agent_id}", summary="One agent", responses=answers(AgentOut, 404))
def show_agent(request: Request, agent_id: str) -> Any:
    state = _state(request)
    row = state.store.get_agent(agent_id)
    if row is None:
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    return agent_view(row, **_loads(state)(agent_id))


@router.delete(
    "/agents/{agent_id}",
    status_code=204,
    summary="Remove an agent (its session stays); 409 while messages wait in its queue",
    responses=answers(None, 404, 409, status=204),
)
def remove_agent(request: Request, agent_id: str) -> Response:
    from nexus.ledger import AgentHasWaitingMessagesError

    try:
        removed = _state(request).store.remove_agent(agent_id)
    except AgentHasWaitingMessagesError as exc:  # removed, its queue routes could not reach them any more
        raise ApiError(409, "conflict", str(exc)) from None
    if not removed:
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    return Response(status_code=204)


@router.get(
    "/agents/{agent_id}/queue",
    summary="The agent's waiting, running and failed messages",
    responses=answers(QueueList, 404),
)
async def agent_queue(request: Request, agent_id: str, include_finished: bool = False) -> Any:
    state = _state(request)
    if await store_call(state, lambda: state.store.get_agent(agent_id)) is None:
        raise ApiError(404, "not_found", f"unknown agent {agent_id!r}")
    statuses = () if include_finished else ("queued", "processing", "failed")
    items = await store_call(state, lambda: state.store.items(agent_id=agent_id, statuses=statuses))
    return {"items": await queue_item_views(state.ledger, items)}
