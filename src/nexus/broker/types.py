"""The broker's public types (seed 003 in snake_case): identities, messages, states, results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from nexus.errors import NexusError

AgentRole = Literal["manager", "worker"]
AgentState = Literal["idle", "running", "streaming", "compacting"]
"""``idle``: no run and nothing runnable; ``running``: a run is active (tools, starting, finishing);
``streaming``: the model is producing output; ``compacting``: the run is summarising its context."""

MAX_CONTENT_CHARS = 1_000_000
"""A message longer than this is refused at ``send`` (it would not fit any model's context)."""


class BrokerError(NexusError):
    """A broker call that cannot be done as asked; the message says what and why."""


class UnknownAgentError(BrokerError, LookupError):
    """No agent is registered under this id."""


class AgentSpecError(BrokerError, ValueError):
    """An agent registration no run could use (a model no run could reach); nothing is stored."""


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """Who an agent is: its id, the session it talks in, and its role."""

    agent_id: str
    session_label: str
    role: AgentRole = "worker"


@dataclass(slots=True)
class AgentMessage:
    """A message to an agent, from a user, another agent or the system (``from`` on the wire)."""

    id: str
    from_: str
    to: str
    content: str
    timestamp: int = 0
    conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    """The session key this message belongs to (``dm:telegram:42``...); ``None``: the agent's own session.

    An agent serves many sessions: each key gets its own queue and ledger session (see
    :func:`nexus.broker.sessions.session_label_for`), one run at a time per session."""

    def to_json(self) -> dict[str, Any]:
        """The wire form, with ``from`` as seed 003 names it (``session`` only when set)."""
        data: dict[str, Any] = {
            "id": self.id,
            "from": self.from_,
            "to": self.to,
            "content": self.content,
            "timestamp": self.timestamp,
            "conversation_id": self.conversation_id,
            "metadata": self.metadata,
        }
        if self.session is not None:
            data["session"] = self.session
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentMessage:
        """Inverse of :meth:`to_json`."""
        return cls(
            id=str(data["id"]),
            from_=str(data.get("from", "user")),
            to=str(data["to"]),
            content=str(data.get("content", "")),
            timestamp=int(data.get("timestamp") or 0),
            conversation_id=data.get("conversation_id"),
            metadata=dict(data.get("metadata") or {}),
            session=str(data["session"]) if data.get("session") else None,
        )


@dataclass(frozen=True, slots=True)
class RegisteredAgent:
    """A registered agent as the broker sees it now."""

    identity: AgentIdentity
    state: AgentState
    last_activity: int
    queue_depth: int


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """What ``send`` did: the queue item that holds the message (durable before this returns)."""

    message_id: str
    queue_item_id: str
    duplicate: bool = False
    """True when a message with this id was already accepted: nothing new was queued."""
    steered: bool = False
    """True when the message was also handed to the agent's running turn."""


@dataclass(frozen=True, slots=True)
class SendAndWaitResult:
    """The outcome of ``send_and_wait`` (seed 003's ``{success, error}`` plus the reply text)."""

    success: bool
    error: str | None = None
    reply: str | None = None
    turn_id: str | None = None
