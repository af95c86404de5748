"""Which agent a session belongs to, how to send to it, and where its messages come from.

A session belongs to at most one agent: the agent's own session, the sessions the broker keeps
per sender for it (``<agent>~dm~telegram~42``, see ``nexus.broker.sessions``), the
``<own session>:user:<user>`` sessions of the OpenAI facade, and any session stamped with the
agent in its ``metadata`` (the facade's named sessions, the web UI's new chats and forks).

A session the broker can run for its agent is one whose label the agent's session key maps to:
its own session (no key), or a keyed one (``routing_key``). The web UI's new chats and forks
are made keyed (``web:<id>``) for exactly that reason: a message sent with that key lands in
that session, through the agent's queue, like any other.
"""

from __future__ import annotations

from nexus._dataclass import dataclass
from nexus.ledger import AgentRow, Session

OWNER_KEY = "agent"
"""The session ``metadata`` key naming the agent a session was made for."""
TITLE_KEY = "title"
"""The session ``metadata`` key holding its display title (a rename never changes the label)."""
WEB_KEY_PREFIX = "web:"
"""The session keys of chats and forks made over HTTP (``POST /v1/sessions``, a fork for an agent)."""


@dataclass(slots=True, frozen=True)
class Ownership:
    """A session's agent (``None``: no agent's), the key that reaches it, and its channel."""

    agent_id: str | None
    session_key: str | None
    channel: str


class Owners:
    """The registry read once, to tell many sessions' owners (a sessions list is one read, not one per row)."""

    def __init__(self, agents: list[AgentRow]) -> None:
        self._by_id = {row.agent_id: row for row in agents}
        self._by_own = {row.session_label: row.agent_id for row in agents}
        self._by_prefix = {row.agent_id[:32]: row.agent_id for row in agents}  # per-sender labels cut long ids
        self._by_prefix.update({row.agent_id: row.agent_id for row in agents})

    def agent(self, agent_id: str | None) -> AgentRow | None:
        """The registered agent ``agent_id`` (``None`` when unknown)."""
        return None if agent_id is None else self._by_id.get(agent_id)

    def owner_id(self, label: str, metadata: dict[str, object] | None) -> str | None:
        """The agent ``label`` belongs to (stamped first, then by its label's shape), or ``None``."""
        stamped = metadata.get(OWNER_KEY) if metadata else None
        if isinstance(stamped, str):
            return stamped
        own = self._by_own.get(label)  # a dict lookup each: a list of 10,000 sessions is not sessions x agents
        if own is None and ":user:" in label:  # the facade's <own session>:user:<user>
            own = self._by_own.get(label.partition(":user:")[0])
        if own is None and "~" in label:  # a per-sender session: <agent id>~<key>
            own = self._by_prefix.get(label.partition("~")[0])
        return own

    def of(self, session: Session) -> Ownership:
        """Who ``session`` belongs to, the ``session`` key a message to that agent must carry to land in it
        (``None`` for the agent's own session, or when no key reaches it), and its channel."""
        from nexus.broker import session_label_for

        agent_id = self.owner_id(session.label, session.metadata)
        row = self.agent(agent_id)
        key = session.routing_key
        reaches = row is not None and key is not None and session_label_for(row.agent_id, row.session_label, key)
        return Ownership(agent_id, key if reaches == session.label else None, _channel(session, row))


def _channel(session: Session, agent: AgentRow | None) -> str:
    """Where the session's messages come from, in one word: a chat platform (``telegram``), ``web`` (this
    server's UI), ``agent`` (the agent's own session: ``nexus send``, HTTP, other agents), ``openai``
    (the chat-completions facade), ``subagent``, ``fork``, ``import`` or ``cli`` (``nexus run``/``chat``)."""
    key = session.routing_key
    if key:
        kind, _, rest = key.partition(":")
        return (rest.partition(":")[0] or kind) if kind in ("dm", "direct", "group") else kind
    if session.is_subagent:
        return "subagent"
    if agent is not None:
        return "agent" if session.label == agent.session_label else "openai"
    return session.origin if session.origin in ("fork", "import") else "cli"
