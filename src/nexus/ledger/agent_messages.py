"""Agent-to-agent messages as stored: the ``broker_messages`` log, with what became of each.

The broker logs every message whose sender is a registered agent (``send_message_to_agent``, a
worker's reply, ``nexus send --from``) in ``broker_messages``, in the transaction that queues it.
The queue item (same message id) says whether a turn consumed it and which; that turn holds the
answer. A reply sent back later (``waitForReply: false``) is a message of its own, whose id is the
asking message's id plus ``:reply`` and whose ``metadata.in_reply_to`` names the ask.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from nexus.ledger._sqlite import Database

_QUERY = (
    "SELECT m.id, m.from_agent, m.to_agent, m.session_label, m.content, m.created_at,"
    " json_extract(m.metadata_json, '$.conversation_id'),"
    " json_extract(q.message_json, '$.metadata.in_reply_to'), q.status, q.turn_id"
    " FROM broker_messages m LEFT JOIN queue_items q ON q.message_id = m.id"
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
    """Reads of the ``broker_messages`` log of one ledger database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def recent(self, *, agent: str | None = None, limit: int = 100) -> list[AgentMessageRecord]:
        """The latest messages, newest first; with ``agent``, only those it sent or received."""
        where, params = ("", []) if agent is None else (" WHERE m.from_agent = ? OR m.to_agent = ?", [agent, agent])
        sql = f"{_QUERY}{where} ORDER BY m.created_at DESC, m.id DESC LIMIT ?"

        def run(conn: sqlite3.Connection) -> list[AgentMessageRecord]:
            return [_record(row) for row in conn.execute(sql, [*params, limit]).fetchall()]

        return self._db.read(run)


def _record(row: tuple[object, ...]) -> AgentMessageRecord:
    ident, sender, to, label, content, created, conversation, in_reply_to, status, turn_id = row
    return AgentMessageRecord(
        str(ident), _opt(sender), str(to), _opt(label), str(content), int(str(created)), _opt(conversation),
        _opt(in_reply_to), str(status or "sent"), _opt(turn_id),
    )  # fmt: skip


def _opt(value: object) -> str | None:
    return None if value is None else str(value)
