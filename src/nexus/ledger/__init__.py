"""The Agents Ledger: every turn, message, tool call and compaction in SQLite.

Sessions are movable pointers into a tree of turns; forks share history; nothing is ever
deleted. ``Ledger.open()`` opens ``$NEXUS_HOME/agents.db``; see docs/ledger.md.

Importing this package is cheap: ``sqlite3`` and the ledger implementation load on first
use of :class:`Ledger` / :func:`default_db_path`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus.ledger._ulid import new_ulid, ulid_time_ms
from nexus.ledger.errors import (
    HeadMovedError,
    LedgerBusyError,
    LedgerError,
    LedgerFullError,
    PiFormatError,
    SchemaVersionError,
    SessionExistsError,
    SessionNotFound,
    TurnNotFound,
    TurnNotSavedError,
    TurnStateError,
)
from nexus.ledger.records import (
    DEFAULT_SESSION,
    SUMMARY_PREFIX,
    CompactionRecord,
    ImportResult,
    QueueItem,
    Session,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
)

if TYPE_CHECKING:
    from nexus.ledger.backend import LedgerBackend
    from nexus.ledger.ledger import Ledger, default_db_path

__all__ = [
    "DEFAULT_SESSION",
    "SUMMARY_PREFIX",
    "CompactionRecord",
    "HeadMovedError",
    "ImportResult",
    "Ledger",
    "LedgerBackend",
    "LedgerBusyError",
    "LedgerError",
    "LedgerFullError",
    "PiFormatError",
    "QueueItem",
    "SchemaVersionError",
    "Session",
    "SessionExistsError",
    "SessionNotFound",
    "StoredMessage",
    "TimelineEntry",
    "ToolCallRecord",
    "Turn",
    "TurnNotFound",
    "TurnNotSavedError",
    "TurnStateError",
    "default_db_path",
    "new_ulid",
    "ulid_time_ms",
]


def __getattr__(name: str) -> Any:
    if name in ("Ledger", "default_db_path"):
        from nexus.ledger import ledger

        return getattr(ledger, name)
    if name == "LedgerBackend":
        from nexus.ledger.backend import LedgerBackend

        return LedgerBackend
    raise AttributeError(f"module 'nexus.ledger' has no attribute {name!r}")
