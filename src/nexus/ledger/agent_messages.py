"""Agent-to-agent messages as stored: the ``broker_messages`` log, with what became of each.

The broker logs every message whose sender is a registered agent (``send_message_to_agent``, a
worker's reply, ``nexus send --from``) in ``broker_messages``, in the transaction that queues it.
The queue item (same message id) says whether a turn consumed it and which; that turn holds the
answer. A reply sent back later (``waitForReply: false``) is a message of its own, whose id is the
asking message's id plus ``:reply`` and whose ``metadata.in_reply_to`` names the ask.
"""

from __future__ import annotations

from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger._rows import loads_opt
from nexus.ledger._sql_db import SqlDatabase

_QUERY = (  # plain SQL both backends run; the JSON columns are read in Python
    "SELECT m.id, m.from_agent, m.to_agent, m.session_label, m.content, m.created_at, m.metadata_json,"
    " q.message_json, q.status, q.turn_id FROM broker_messages m LEFT JOIN queue_items q ON q.message_id = m.id"
)


@dataclass(frozen=True, slots=True)
class AgentMessageRecord:
    """One logged agent-to-agent message and its queue item's fate (``status``, the consuming ``turn_id``)."""

    id: str
    from_agent: str | None
    to_agent: str
    session_label: str | None
    content: str
    created_at: int
    conversation_id: str | None
    in_reply_to: str | None
    status: str
    turn_id: str | None


class AgentMessageLog:
    """Reads of the ``broker_messages`` log of one ledger database (SQLite or PostgreSQL)."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def recent(self, *, agent: str | None = None, limit: int = 100) -> list[AgentMessageRecord]:
        """The latest messages, newest first; with ``agent``, only those it sent or received."""
        where, params = ("", []) if agent is None else (" WHERE m.from_agent = ? OR m.to_agent = ?", [agent, agent])
        sql = f"{_QUERY}{where} ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
        rows = await self._db.run_read(lambda conn: conn.execute(sql, [*params, limit]).fetchall())
        return [_record(row) for row in rows]


def _record(row: Any) -> AgentMessageRecord:
    ident, sender, to, label, content, created, metadata, message, status, turn_id = row
    meta, queued = loads_opt(metadata), loads_opt(message)
    asked = queued.get("metadata") if isinstance(queued, dict) else None
    return AgentMessageRecord(
        str(ident), _opt(sender), str(to), _opt(label), str(content), int(created),
        _opt(meta.get("conversation_id") if isinstance(meta, dict) else None),
        _opt(asked.get("in_reply_to") if isinstance(asked, dict) else None), str(status or "sent"), _opt(turn_id),
    )  # fmt: skip


def _opt(value: object) -> str | None:
    return None if value is None else str(value)
