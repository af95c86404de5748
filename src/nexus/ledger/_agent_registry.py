"""The broker's agent registry in ``agents.db``: who is registered, with which role, session and spec.

:class:`~nexus.ledger.broker_store.BrokerStore` inherits it, so one store object serves the registry
and the queue items over the same database. A registered agent always points at an existing session
(created with it), and no two active agents share a session: they would run into one history
(which sessions count as another agent's: :mod:`nexus.ledger._session_owner`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger._rows import dumps, loads_opt
from nexus.ledger._schema import PENDING
from nexus.ledger._session_owner import refuse_shared_session
from nexus.ledger._sqlite import Database
from nexus.ledger.errors import AgentHasWaitingMessagesError
from nexus.ledger.records import NewSession
from nexus.llm import now_ms


@dataclass(frozen=True, slots=True)
class AgentRow:
    """A registered agent as stored: its id, role, session and spec (JSON)."""

    agent_id: str
    role: str
    session_label: str
    spec: dict[str, Any]
    status: str
    created_at: int
    updated_at: int


def _agent(row: tuple[Any, ...]) -> AgentRow:
    return AgentRow(
        agent_id=row[0],
        role=row[1],
        session_label=row[2] or "",
        spec=loads_opt(row[3]) or {},
        status=row[4],
        created_at=row[5],
        updated_at=row[6],
    )


class AgentRegistry:
    """The ``agents`` rows of one database (``_db`` is set by the store that inherits this)."""

    _db: Database

    def save_agent(self, agent_id: str, *, role: str, session_label: str, spec: dict[str, Any]) -> AgentRow:
        """Create or update an agent (a removed agent with the same id comes back).

        Its session is created in the same transaction when it does not exist yet (an alias
        resolves to its session), so an agent never points at a missing session. A session another
        active agent talks in is refused as by :meth:`add_agent` (nothing written).
        """

        def run(conn: sqlite3.Connection) -> AgentRow:
            refuse_shared_session(conn, agent_id, session_label)
            return self._upsert_agent(conn, agent_id, role, session_label, spec)

        return self._db.write(run)

    def add_agent(
        self, agent_id: str, *, role: str | None = None, session_label: str | None = None, spec: dict[str, Any]
    ) -> AgentRow:
        """Register an agent, or update the active one with this id keeping what the caller left out.

        ``nexus agents add ID --tools …`` on an existing agent changes its tools only: a ``None``
        role or session and every spec key not in ``spec`` keep their stored values (a new agent
        gets ``worker`` and ``agent:<id>``); a spec key given as ``None`` is removed (its default again).
        A session another active agent talks in is refused
        (:class:`AgentSessionTakenError`, nothing written): two agents in one session would run
        into one history. Read, check and write share one transaction.
        """

        def run(conn: sqlite3.Connection) -> AgentRow:
            stored = self._get_agent(conn, agent_id)
            if session_label is not None:
                refuse_shared_session(conn, agent_id, session_label)
            role_now, label_now, spec_now = agent_update(stored, agent_id, role, session_label, spec)
            if stored is None:
                refuse_shared_session(conn, agent_id, label_now)
            return self._upsert_agent(conn, agent_id, role_now, label_now, spec_now)

        return self._db.write(run)

    def _upsert_agent(
        self, conn: sqlite3.Connection, agent_id: str, role: str, session_label: str, spec: dict[str, Any]
    ) -> AgentRow:
        from nexus.ledger import _sessions

        try:
            label = _sessions.resolve(conn, session_label).label
        except LookupError:
            label = _sessions.create(conn, NewSession(session_label)).label
        now = now_ms()
        conn.execute(
            "INSERT INTO agents (id, name, role, session_label, config_json, status, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 'active', ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET role = excluded.role, session_label = excluded.session_label,"
            " config_json = excluded.config_json, status = 'active', updated_at = excluded.updated_at",
            (agent_id, agent_id, role, label, dumps(spec), now, now),
        )
        return self._get_agent(conn, agent_id)  # type: ignore[return-value]  # just written

    def get_agent(self, agent_id: str) -> AgentRow | None:
        """The active agent with this id, or ``None``."""
        return self._db.read(lambda c: self._get_agent(c, agent_id))

    def list_agents(self) -> list[AgentRow]:
        """Every active agent, by id."""
        rows = self._db.read(
            lambda c: c.execute(
                "SELECT id, role, session_label, config_json, status, created_at, updated_at FROM agents"
                " WHERE status = 'active' ORDER BY id"
            ).fetchall()
        )
        return [_agent(row) for row in rows]

    def remove_agent(self, agent_id: str) -> bool:
        """Mark an agent removed (its session and history stay); ``False`` if it was not registered.

        Refused while messages wait in its queue (:class:`AgentHasWaitingMessagesError`, nothing
        changed): removed, it could no longer be listed or cleared by its id while they ran. A run
        that already holds its messages finishes; its reply is written as usual. Once removed, an
        accept for it is refused in its own transaction (``_queue_rows.removed_in``), so none lands
        between this count and the removal.
        """

        def run(conn: sqlite3.Connection) -> bool:
            waiting = conn.execute(
                f"SELECT COUNT(*) FROM queue_items WHERE {PENDING} AND +agent_id = ? AND status = 'queued'",
                (agent_id,),
            ).fetchone()[0]
            if waiting and self._get_agent(conn, agent_id) is not None:
                raise AgentHasWaitingMessagesError(agent_id, int(waiting))
            cursor = conn.execute(
                "UPDATE agents SET status = 'removed', updated_at = ? WHERE id = ? AND status = 'active'",
                (now_ms(), agent_id),
            )
            return cursor.rowcount > 0

        return self._db.write(run)

    @staticmethod
    def _get_agent(conn: sqlite3.Connection, agent_id: str) -> AgentRow | None:
        row = conn.execute(
            "SELECT id, role, session_label, config_json, status, created_at, updated_at FROM agents"
            " WHERE id = ? AND status = 'active'",
            (agent_id,),
        ).fetchone()
        return None if row is None else _agent(row)


def agent_update(
    stored: AgentRow | None, agent_id: str, role: str | None, session_label: str | None, spec: dict[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    """Role, session and spec of an agent once :meth:`AgentRegistry.add_agent` applied these to ``stored``
    (``None``: a new agent, ``worker`` in ``agent:<id>``): what is left out keeps its stored value, a spec
    key given as ``None`` is removed. ``nexus.toml``'s tables use it to see whether there is anything to write."""
    if stored is None:
        return role or "worker", session_label or f"agent:{agent_id}", _set({}, spec)
    return role or stored.role, session_label or stored.session_label, _set(stored.spec, spec)


def _set(stored: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``stored`` updated with ``given``; a key given as ``None`` is removed."""
    return {key: value for key, value in {**stored, **given}.items() if value is not None}
