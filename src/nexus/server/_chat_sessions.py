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

from nexus.ledger import AgentRow, NewSession, SessionNotFound
from nexus.server._errors import ApiError
from nexus.server._owners import OWNER_KEY, Owners
from nexus.server._state import ServerState


async def claim_chat_session(state: ServerState, agent: AgentRow, label: str) -> str:
    """The session's own label, created (stamped for ``agent``) when missing; 409 when another agent's."""
    if label == agent.session_label:
        return label
    try:
        resolved = await state.ledger.sessions.resolve(label)
    except SessionNotFound:
        resolved = None
    owner = _owner(state, resolved.label if resolved else label, resolved.metadata if resolved else None)
    if resolved is None and owner in (None, agent.agent_id):  # new: stamped as this agent's
        resolved = await state.ledger.sessions.ensure(NewSession(label, metadata={OWNER_KEY: agent.agent_id}))
        owner = _owner(state, resolved.label, resolved.metadata)  # a racing creator's stamp wins
    if resolved is None or (owner is not None and owner != agent.agent_id):
        raise ApiError(
            409, "conflict",
            f"session {label!r} belongs to agent {owner!r}: talk to it with model {owner!r}, or name another session",
        )  # fmt: skip
    return resolved.label


def _owner(state: ServerState, label: str, metadata: dict[str, object] | None) -> str | None:
    """The agent ``label`` belongs to, or None (a session of no agent: anyone's)."""
    return Owners(state.store.list_agents()).owner_id(label, metadata)
