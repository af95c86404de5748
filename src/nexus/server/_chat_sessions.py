"""Which session a chat completion may run in: a session belongs to one agent.

``X-Nexus-Session`` (or ``user``) may name any session label, but a session that is another
agent's — its own session, the ``<its session>:user:<user>`` sessions the facade makes for it,
its per-sender chat sessions (``<agent id>~…``, see ``nexus.broker.sessions``), or one the
facade opened for it earlier — is refused with 409: a turn of this agent written there would
enter the other agent's history, outside its queue and run lock.

The facade stamps each session it creates with its agent (``metadata.agent``), so a free name
such as ``project-x`` stays the first agent's.
"""

from __future__ import annotations

from nexus.ledger import AgentRow, SessionNotFound
from nexus.server._errors import ApiError
from nexus.server._state import ServerState

OWNER_KEY = "agent"
"""The session ``metadata`` key naming the agent whose session the facade created."""


def claim_chat_session(state: ServerState, agent: AgentRow, label: str) -> str:
    """The session's own label, created (stamped for ``agent``) when missing; 409 when another agent's."""
    if label == agent.session_label:
        return label
    try:
        resolved = state.ledger.resolve_session(label)
    except SessionNotFound:
        resolved = None
    owner = _owner(state, resolved.label if resolved else label, resolved.metadata if resolved else None)
    if resolved is None and owner in (None, agent.agent_id):  # new: stamped as this agent's
        resolved = state.ledger.ensure_session(label, metadata={OWNER_KEY: agent.agent_id})
        owner = _owner(state, resolved.label, resolved.metadata)  # a racing creator's stamp wins
    if resolved is None or (owner is not None and owner != agent.agent_id):
        raise ApiError(
            409, "conflict",
            f"session {label!r} belongs to agent {owner!r}: talk to it with model {owner!r}, or name another session",
        )  # fmt: skip
    return resolved.label


def _owner(state: ServerState, label: str, metadata: dict[str, object] | None) -> str | None:
    """The agent ``label`` belongs to, or None (a session of no agent: anyone's)."""
    stamped = metadata.get(OWNER_KEY) if metadata else None
    if isinstance(stamped, str):
        return stamped
    for row in state.store.list_agents():
        own = row.session_label
        if label == own or label.startswith(f"{own}:user:") or _per_sender_of(row.agent_id, label):
            return row.agent_id
    return None


def _per_sender_of(agent_id: str, label: str) -> bool:
    """True for a label ``session_label_for`` gives one of the agent's per-sender sessions."""
    prefix, tilde, _ = label.partition("~")
    return bool(tilde) and prefix in (agent_id, agent_id[:32])
