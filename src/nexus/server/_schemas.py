"""The API's response bodies as JSON schemas, for ``/openapi.json`` (documentation, not validation).

Routes build their answers with ``nexus.server._views``; these models describe those answers so
the OpenAPI document is true, and ``tests/server/test_server_fuzz.py`` checks every response
against them (schemathesis' response conformance). They are not ``response_model``s: answers are
not re-validated on the hot path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ErrorDetail(BaseModel):
    """What went wrong: a short ``type`` for programs and a ``message`` for people."""

    type: str
    message: str
    param: str | None = Field(default=None, description="the request field at fault (OpenAI facade refusals)")
    code: str | None = Field(default=None, description="unsupported_value / unknown_parameter (with param)")


class ErrorBody(BaseModel):
    """Every error the API answers has this shape."""

    error: ErrorDetail


class Health(BaseModel):
    """Liveness: ``ok``; ``degraded`` (still 200: reads work, a restart would not help) when the ledger cannot be
    written (a full disk); ``unavailable`` (503) when the ledger's database does not answer within a few seconds."""

    status: Literal["ok", "degraded", "unavailable"]
    version: str
    ledger: Literal["ok", "read_only", "unreachable"]
    detail: str | None = Field(
        default=None, description="why the ledger is read-only (`degraded`) or unreachable (`unavailable`)"
    )


class SessionOut(BaseModel):
    """A session: a movable pointer (``head_turn_id``) into the turn tree, and whose it is."""

    label: str
    title: str | None = Field(description="its display title (PATCH sets it); the label never changes")
    head_turn_id: str | None
    origin: str
    status: str = Field(description="active, or archived (hidden from lists; every turn kept)")
    created_at: int
    updated_at: int
    is_subagent: bool
    parent_session_label: str | None
    agent: str | None = Field(description="the agent the session belongs to (null: no agent's)")
    session_key: str | None = Field(
        description="the `session` a message to that agent must carry to run here (null: its own session, "
        "or no key reaches this one)"
    )
    channel: str = Field(
        description="where its messages come from: a platform (telegram), web, agent, openai, subagent, fork, "
        "import or cli"
    )


class SessionList(BaseModel):
    sessions: list[SessionOut]


class TurnOut(BaseModel):
    """A turn's summary: its place in the tree, status, model, tokens and cost."""

    id: str
    parent_turn_id: str | None
    session_label: str
    turn_type: str
    status: str
    depth: int
    model: str | None
    provider: str | None
    started_at: int
    completed_at: int | None
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float | None
    stop_reason: str | None
    tool_call_count: int
    has_children: bool
    error: str | None = Field(description="why the turn failed or was aborted, in one line")


class SessionDetail(SessionOut):
    aliases: list[str]
    head: TurnOut | None
    turns: int


class MessageOut(BaseModel):
    """A stored message: its ledger id and place, then the message in ``nexus.llm``'s JSON form."""

    model_config = ConfigDict(extra="allow")
    id: int
    turn_id: str
    ordinal: int
    role: str
    text: str | None = Field(default=None, description="user messages: what the user wrote")
    event_context: str | None = Field(
        default=None, description="user messages: the [Event context] header the model was given before it"
    )


class DeliveryOut(BaseModel):
    """Where a turn's reply went (a chat adapter) and how that ended."""

    id: str
    turn_id: str | None
    queue_item_id: str | None
    session_label: str
    run_id: str | None
    adapter: str
    account_id: str
    target: dict[str, Any]
    path: str
    status: str
    message_ids: list[str]
    error: str | None
    attempts: int
    blocks_sent: int
    started_at: int
    completed_at: int


class HistoryTurn(TurnOut):
    messages: list[MessageOut]
    deliveries: list[DeliveryOut]


class History(BaseModel):
    label: str
    turns: list[HistoryTurn]


class TreeTurn(TurnOut):
    on_path: bool
    heads_of: list[str]
    deliveries: list[DeliveryOut]
    preview: str = Field(description="what the user wrote (else the reply's start), at most 200 characters")


class Tree(BaseModel):
    label: str
    head_turn_id: str | None
    truncated: bool
    turns: list[TreeTurn]


class ToolCallOut(BaseModel):
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str
    error: str | None
    started_at: int | None
    completed_at: int | None
    spawned_session_label: str | None


class TurnDetail(TurnOut):
    messages: list[MessageOut]
    tool_calls: list[ToolCallOut]
    deliveries: list[DeliveryOut]


class ImportResult(BaseModel):
    label: str
    fork_labels: list[str]
    turns: int
    messages: int
    compactions: int
    unknown_entries: dict[str, int] = Field(
        default_factory=dict,
        description="entries of a type pi's format does not define, by type: kept with their turn and exported back "
        "as they came, but read by nothing here",
    )


class AgentOut(BaseModel):
    """A registered agent with its live state (``idle`` when no broker runs it here)."""

    id: str
    role: str
    session_label: str
    spec: dict[str, Any]
    state: str
    queue_depth: int
    created_at: int
    updated_at: int


class AgentList(BaseModel):
    agents: list[AgentOut]


class QueueItemOut(BaseModel):
    """A durable queue item (as ``nexus queue list --json``) and how the turn that consumed it ended."""

    model_config = ConfigDict(populate_by_name=True)
    id: str
    agent: str | None
    session: str
    session_key: str | None
    message_id: str | None
    from_: str | None = Field(alias="from")
    mode: str
    status: str
    attempts: int
    enqueued_at: int
    error: str | None
    turn_id: str | None
    content: str
    turn_status: str | None
    turn_error: str | None


class QueueList(BaseModel):
    items: list[QueueItemOut]


class Receipt(BaseModel):
    """A message accepted durably: its id and the queue item holding it."""

    message_id: str
    queue_item_id: str
    duplicate: bool
    steered: bool
    pushed_out: list[str] = Field(
        default_factory=list,
        description="ids of older messages the session's queue cap dropped to make room for this one (drop policies "
        "old and summarize); GET /v1/agents/{id}/queue?include_finished=true shows them as dropped",
    )
    deliver: dict[str, Any] | None = Field(
        default=None, description="the resolved reply target, when the message asked for one (null: a duplicate)"
    )
    route: dict[str, Any] | None = Field(
        default=None,
        description="with route: the mode, the A/B arm, the agent and session the message went to, and the decision",
    )


class RouteDecision(BaseModel):
    """A routing decision (docs/routing.md): continue ``checkpoint`` (``existing``) or start ``new``."""

    mode: str
    checkpoint: dict[str, Any] | None
    confidence: float
    threshold: float
    alternatives: list[dict[str, Any] | None]
    scores: list[dict[str, Any]]
    notes: list[str]
    decision_id: str | None
    took_ms: float


class Aborted(BaseModel):
    agent_id: str
    aborted: bool


class Dropped(BaseModel):
    agent_id: str
    dropped: int


class ModelOut(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelOut]


class ChatReply(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: ChatReply
    finish_reason: str
    logprobs: None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """OpenAI's ``chat.completion`` (non-streamed); streamed, ``chat.completion.chunk`` events then ``[DONE]``."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
    system_fingerprint: None


class AgentMessageOut(BaseModel):
    """One agent-to-agent message (``broker_messages``) and the reply its turn gave."""

    model_config = ConfigDict(populate_by_name=True)
    id: str
    from_: str | None = Field(alias="from")
    to: str
    session_label: str | None
    content: str
    created_at: int
    conversation_id: str | None
    in_reply_to: str | None = Field(description="the message this one answers (a worker's result), if any")
    status: str = Field(description="the queue item's status: queued, processing, delivered, failed, dropped")
    turn_id: str | None
    turn_status: str | None
    reply: str | None = Field(description="the reply text of the turn that consumed it (null until there is one)")


class AgentMessageList(BaseModel):
    messages: list[AgentMessageOut]


class Catalog(BaseModel):
    """What an agent form offers: tool names, queue modes and the model catalog."""

    tools: list[str]
    queue_modes: list[str]
    models: list[str]
