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
    LeaseLostError,
    LedgerBusyError,
    LedgerError,
    LedgerFullError,
    LedgerUnavailableError,
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
    HEAD,
    SUMMARY_PREFIX,
    AcceptRequest,
    CompactionRecord,
    ImportResult,
    JournalEntry,
    JournalMessage,
    JournalReply,
    JournalToolCall,
    Lease,
    NewSession,
    QueueItem,
    Session,
    SessionQuery,
    Settlement,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
    TurnDetails,
    TurnOpen,
    TurnWrite,
)

if TYPE_CHECKING:
    from nexus.ledger.ledger import Ledger, default_db_path
    from nexus.ledger.protocols import (
        AgentStore,
        DeliveryStore,
        LeaseStore,
        PiFiles,
        PointerLog,
        QueueFeed,
        QueueStore,
        SessionStore,
        TurnStore,
        TurnTree,
    )

_PROTOCOLS = (
    "AgentStore",
    "DeliveryStore",
    "LeaseStore",
    "PiFiles",
    "PointerLog",
    "QueueFeed",
    "QueueStore",
    "SessionStore",
    "TurnStore",
    "TurnTree",
)

__all__ = [
    "DEFAULT_SESSION",
    "HEAD",
    "SUMMARY_PREFIX",
    "AcceptRequest",
    "AgentStore",
    "CompactionRecord",
    "DeliveryStore",
    "HeadMovedError",
    "ImportResult",
    "JournalEntry",
    "JournalMessage",
    "JournalReply",
    "JournalToolCall",
    "Lease",
    "LeaseLostError",
    "LeaseStore",
    "Ledger",
    "LedgerBusyError",
    "LedgerError",
    "LedgerFullError",
    "LedgerUnavailableError",
    "NewSession",
    "PiFiles",
    "PiFormatError",
    "PointerLog",
    "QueueFeed",
    "QueueItem",
    "QueueStore",
    "SchemaVersionError",
    "Session",
    "SessionExistsError",
    "SessionNotFound",
    "SessionQuery",
    "SessionStore",
    "Settlement",
    "StoredMessage",
    "TimelineEntry",
    "ToolCallRecord",
    "Turn",
    "TurnDetails",
    "TurnNotFound",
    "TurnNotSavedError",
    "TurnOpen",
    "TurnStateError",
    "TurnStore",
    "TurnTree",
    "TurnWrite",
    "default_db_path",
    "new_ulid",
    "ulid_time_ms",
]


def __getattr__(name: str) -> Any:
    if name in ("Ledger", "default_db_path"):
        from nexus.ledger import ledger

        return getattr(ledger, name)
    if name in _PROTOCOLS:
        from nexus.ledger import protocols

        return getattr(protocols, name)
    raise AttributeError(f"module 'nexus.ledger' has no attribute {name!r}")
