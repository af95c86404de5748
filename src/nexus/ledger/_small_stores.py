"""The SQL backends' smaller stores: the agent registry, the delivery log and pi session files.

Each wraps the synchronous implementation that owns its rows (``_agent_registry``, ``deliveries``,
``pi_jsonl``) and runs it where its database's work runs (inline on SQLite, on a worker thread for a
database reached over the network), so the event loop never waits for it.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus.ledger._agent_registry import AgentRegistry, AgentRow
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger.deliveries import DeliveryLog, DeliveryRecord
from nexus.ledger.records import ImportResult

if TYPE_CHECKING:
    from nexus.ledger.pi_jsonl import OnDatabase


class _Registry(AgentRegistry):
    """The ``agents`` rows of one database, for :class:`SqlAgentStore`."""

    def __init__(self, db: Any) -> None:
        self._db = db


class SqlAgentStore:
    """:class:`~nexus.ledger.protocols.AgentStore` of one SQL ledger database."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._rows = _Registry(db)

    async def save(self, agent_id: str, *, role: str, session_label: str, spec: dict[str, Any]) -> AgentRow:
        """Create or update an agent with exactly these values (its session created with it)."""
        return await self._db.run(
            lambda: self._rows.save_agent(agent_id, role=role, session_label=session_label, spec=spec)
        )

    async def add(
        self, agent_id: str, *, role: str | None = None, session_label: str | None = None, spec: dict[str, Any]
    ) -> AgentRow:
        """Register an agent, or update the active one keeping what the caller left out."""
        return await self._db.run(
            lambda: self._rows.add_agent(agent_id, role=role, session_label=session_label, spec=spec)
        )

    async def get(self, agent_id: str) -> AgentRow | None:
        """The active agent with this id, or ``None``."""
        return await self._db.run(lambda: self._rows.get_agent(agent_id))

    async def list(self) -> builtins.list[AgentRow]:
        """Every active agent, by id."""
        return await self._db.run(self._rows.list_agents)

    async def remove(self, agent_id: str) -> bool:
        """Mark an agent removed (its session and history stay); False if it was not registered."""
        return await self._db.run(lambda: self._rows.remove_agent(agent_id))


class SqlDeliveryStore:
    """:class:`~nexus.ledger.protocols.DeliveryStore` of one SQL ledger database."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._log = DeliveryLog(db)

    async def record(self, delivery: DeliveryRecord) -> DeliveryRecord:
        """Store one finished delivery; returns it with its new id."""
        return await self._db.run(lambda: self._log.record(delivery))

    async def for_turns(self, turn_ids: Sequence[str]) -> dict[str, list[DeliveryRecord]]:
        """The deliveries of each turn (oldest first); turns without any are left out."""
        return await self._db.run(lambda: self._log.for_turns(turn_ids))

    async def recent(self, *, session_label: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        """The latest deliveries (of one session, or of all), newest first."""
        return await self._db.run(lambda: self._log.recent(session_label=session_label, limit=limit))


class SqlPiFiles:
    """:class:`~nexus.ledger.protocols.PiFiles` of one SQL ledger (``nexus.ledger.pi_jsonl``)."""

    def __init__(self, ledger: OnDatabase) -> None:
        self._ledger = ledger

    async def import_pi(self, path: str | Path, label: str | None = None) -> ImportResult:
        """Import a pi session file in one transaction."""
        from nexus.ledger.pi_jsonl import import_pi_session

        return await self._ledger.database.run(lambda: import_pi_session(self._ledger, path, label))

    async def export_pi(self, session_label: str) -> str:
        """A session's history as the text of a pi session file."""
        from nexus.ledger.pi_jsonl import pi_session_text

        return await self._ledger.database.run(lambda: pi_session_text(self._ledger, session_label))
