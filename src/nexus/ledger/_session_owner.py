"""Whether a session belongs to another agent, asked when an agent is registered on it (or moved to it).

The registry refuses a session another active agent talks in: two agents in one session would each
read the other's turns as its own history. "Talks in" is more than the other agent's own session.
The facts are the ones the chat facade reads for its 409 (``nexus.server`` ``_owners``):

- the session is stamped with the agent (``metadata.agent``: the facade's named sessions, the web
  UI's new chats and forks);
- it is the agent's own session, or the facade's ``<own session>:user:<user>`` session of it;
- it is one of the agent's per-sender sessions, ``<agent id>~<key>`` (routed forks ``lead~fork~…``
  are such sessions; a long id is cut to 32 characters there, see ``nexus.broker.sessions``).

A sub-agent's session (``<parent>/<label>-<ulid>``, made by the engine for the worker about to be
registered on it) is judged by its stamp only: its label starts with its parent's, not its owner's.

Besides, an agent that left a session (moved, or removed) may still have messages waiting or running
there: they run in that session, so another agent is refused it until they are finished or cleared.
"""

from __future__ import annotations

from typing import Any

from nexus.ledger._schema import PENDING
from nexus.ledger.errors import AgentSessionTakenError

_PREFIX_CHARS = 32
"""A per-sender label of an agent id that is not plain keeps this many characters of it."""


def refuse_shared_session(conn: Any, agent_id: str, label: str) -> None:
    """AgentSessionTakenError when ``label`` (or the session it aliases) is another active agent's,
    or another agent still has unfinished queue items in it."""
    from nexus.ledger import _sessions

    metadata: dict[str, Any] = {}
    subagent = False
    try:
        session = _sessions.resolve(conn, label)
    except LookupError:
        pass  # a new session: only its label's shape can name an owner
    else:
        label, metadata, subagent = session.label, session.metadata or {}, session.is_subagent
    owner = _owner(conn, agent_id, label, metadata.get("agent"), subagent)
    if owner is not None:
        raise AgentSessionTakenError(label, owner)
    busy = conn.execute(
        f"SELECT agent_id, COUNT(*) FROM queue_items WHERE session_label = ? AND {PENDING}"
        " AND agent_id IS NOT NULL AND agent_id != ? GROUP BY agent_id ORDER BY agent_id LIMIT 1",
        (label, agent_id),
    ).fetchone()
    if busy is not None:
        raise AgentSessionTakenError(label, str(busy[0]), pending=int(busy[1]))


def _owner(conn: Any, agent_id: str, label: str, stamped: object, subagent: bool) -> str | None:
    """The other active agent ``label`` belongs to, or ``None`` (this agent's, or nobody's)."""
    if isinstance(stamped, str):  # stamped first, as the facade reads it
        return stamped if stamped != agent_id and _active(conn, stamped) else None
    own = _own(conn, agent_id, label)
    if own is not None or subagent:
        return own
    if ":user:" in label:  # the facade's <own session>:user:<user>
        own = _own(conn, agent_id, label.partition(":user:")[0])
    if own is None and "~" in label:  # a per-sender session: <agent id>~<key>
        prefix = label.partition("~")[0]
        if len(prefix) >= _PREFIX_CHARS:
            prefix = prefix[:_PREFIX_CHARS]
        row = conn.execute(
            "SELECT id FROM agents WHERE status = 'active' AND id != ?"
            f" AND (id = ? OR substr(id, 1, {_PREFIX_CHARS}) = ?) ORDER BY id LIMIT 1",
            (agent_id, prefix, prefix),
        ).fetchone()
        own = None if row is None or _owns_prefix(agent_id, prefix) else str(row[0])
    return own


def _owns_prefix(agent_id: str, prefix: str) -> bool:
    """Whether ``agent_id``'s own per-sender labels start with ``prefix`` (its own sessions, not another's)."""
    return agent_id == prefix or (len(prefix) == _PREFIX_CHARS and agent_id[:_PREFIX_CHARS] == prefix)


def _own(conn: Any, agent_id: str, label: str) -> str | None:
    """The other active agent whose own session is ``label``."""
    row = conn.execute(
        "SELECT id FROM agents WHERE session_label = ? AND status = 'active' AND id != ? ORDER BY id LIMIT 1",
        (label, agent_id),
    ).fetchone()
    return None if row is None else str(row[0])


def _active(conn: Any, agent_id: str) -> bool:
    """Whether ``agent_id`` is a registered, active agent (a removed agent's stamp holds nothing)."""
    return conn.execute("SELECT 1 FROM agents WHERE id = ? AND status = 'active'", (agent_id,)).fetchone() is not None
