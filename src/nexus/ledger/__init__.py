"""The Agents Ledger: every turn, message, tool call and compaction in SQLite.

Sessions are movable pointers into a tree of turns; forks share history; nothing is ever
deleted. ``Ledger.open()`` opens ``$NEXUS_HOME/agents.db``; see docs/ledger.md.

Importing this package is cheap: ``sqlite3`` and the ledger implementation load on first
use of :class:`Ledger` / :func:`default_db_path`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.ledger._ulid import new_ulid, ulid_time_ms
from nexus.ledger.errors import (
    HeadMovedError,
    LeaseLostError,
    LedgerBusyError,
    LedgerError,
    LedgerFullError,
    LedgerReadOnlyError,
    LedgerRefusedError,
    LedgerUnavailableError,
    PiFormatError,
    SchemaVersionError,
    SessionExistsError,
    SessionLabelError,
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
    from nexus.ledger._admin import migrate_database
    from nexus.ledger._agent_registry import AgentRow, agent_update
    from nexus.ledger._checkpoint import background_checkpoints
    from nexus.ledger._claims import claimant
    from nexus.ledger._copy import Copied, copy_ledger
    from nexus.ledger._disk import full_disk, read_only_place
    from nexus.ledger._health import holdings, integrity_problems
    from nexus.ledger._owners import pid_alive
    from nexus.ledger._queue_rows import REPLY_SUFFIX
    from nexus.ledger._sqlite import WAIT_ENV, wait_bound
    from nexus.ledger.agent_messages import AgentMessageLog, AgentMessageRecord
    from nexus.ledger.broker_store import BrokerStore
    from nexus.ledger.deliveries import DeliveryLog, DeliveryRecord, DeliveryStatus
    from nexus.ledger.errors import (
        AgentHasWaitingMessagesError,
        AgentRemovedError,
        AgentSessionTakenError,
        QueueItemsFinishedError,
        QueueItemsHeldError,
    )
    from nexus.ledger.forks import TurnNotInHistory, fork_session
    from nexus.ledger.labels import label_problem
    from nexus.ledger.ledger import Ledger, default_db_path
    from nexus.ledger.pi_jsonl import pi_session_text
    from nexus.ledger.postgres import is_postgres_url, location_problem, redacted
    from nexus.ledger.postgres._run_events import RunEventLog, StoredEvent
    from nexus.ledger.protocols import (
        AgentStore,
        DeliveryStore,
        LeaseStore,
        PiFiles,
        PointerLog,
        QueueFeed,
        QueueListener,
        QueueStore,
        SessionStore,
        TurnStore,
        TurnTree,
    )
    from nexus.ledger.records import USAGE_ESTIMATED_KEY, TurnStatus


__all__ = [
    "DEFAULT_SESSION",
    "HEAD",
    "REPLY_SUFFIX",
    "SUMMARY_PREFIX",
    "USAGE_ESTIMATED_KEY",
    "WAIT_ENV",
    "AcceptRequest",
    "AgentHasWaitingMessagesError",
    "AgentMessageLog",
    "AgentMessageRecord",
    "AgentRemovedError",
    "AgentRow",
    "AgentSessionTakenError",
    "AgentStore",
    "BrokerStore",
    "CompactionRecord",
    "Copied",
    "DeliveryLog",
    "DeliveryRecord",
    "DeliveryStatus",
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
    "LedgerReadOnlyError",
    "LedgerRefusedError",
    "LedgerUnavailableError",
    "NewSession",
    "PiFiles",
    "PiFormatError",
    "PointerLog",
    "QueueFeed",
    "QueueItem",
    "QueueItemsFinishedError",
    "QueueItemsHeldError",
    "QueueListener",
    "QueueStore",
    "RunEventLog",
    "SchemaVersionError",
    "Session",
    "SessionExistsError",
    "SessionLabelError",
    "SessionNotFound",
    "SessionQuery",
    "SessionStore",
    "Settlement",
    "StoredEvent",
    "StoredMessage",
    "TimelineEntry",
    "ToolCallRecord",
    "Turn",
    "TurnDetails",
    "TurnNotFound",
    "TurnNotInHistory",
    "TurnNotSavedError",
    "TurnOpen",
    "TurnStateError",
    "TurnStatus",
    "TurnStore",
    "TurnTree",
    "TurnWrite",
    "agent_update",
    "background_checkpoints",
    "claimant",
    "copy_ledger",
    "default_db_path",
    "fork_session",
    "full_disk",
    "holdings",
    "integrity_problems",
    "is_postgres_url",
    "label_problem",
    "location_problem",
    "migrate_database",
    "new_ulid",
    "pi_session_text",
    "pid_alive",
    "read_only_place",
    "redacted",
    "ulid_time_ms",
    "wait_bound",
]


_LAZY: dict[str, str] = {
    "AgentMessageRecord": "nexus.ledger.agent_messages",
    "AgentMessageLog": "nexus.ledger.agent_messages",
    "Ledger": "nexus.ledger.ledger",
    "default_db_path": "nexus.ledger.ledger",
    "AgentStore": "nexus.ledger.protocols",
    "DeliveryStore": "nexus.ledger.protocols",
    "PiFiles": "nexus.ledger.protocols",
    "PointerLog": "nexus.ledger.protocols",
    "QueueFeed": "nexus.ledger.protocols",
    "QueueListener": "nexus.ledger.protocols",
    "LeaseStore": "nexus.ledger.protocols",
    "QueueStore": "nexus.ledger.protocols",
    "SessionStore": "nexus.ledger.protocols",
    "TurnStore": "nexus.ledger.protocols",
    "TurnTree": "nexus.ledger.protocols",
    "AgentRow": "nexus.ledger._agent_registry",
    "agent_update": "nexus.ledger._agent_registry",
    "AgentHasWaitingMessagesError": "nexus.ledger.errors",
    "AgentRemovedError": "nexus.ledger.errors",
    "AgentSessionTakenError": "nexus.ledger.errors",
    "BrokerStore": "nexus.ledger.broker_store",
    "DeliveryLog": "nexus.ledger.deliveries",
    "DeliveryRecord": "nexus.ledger.deliveries",
    "DeliveryStatus": "nexus.ledger.deliveries",
    "QueueItemsFinishedError": "nexus.ledger.errors",
    "QueueItemsHeldError": "nexus.ledger.errors",
    "REPLY_SUFFIX": "nexus.ledger._queue_rows",
    "TurnStatus": "nexus.ledger.records",
    "USAGE_ESTIMATED_KEY": "nexus.ledger.records",
    "WAIT_ENV": "nexus.ledger._sqlite",
    "background_checkpoints": "nexus.ledger._checkpoint",
    "claimant": "nexus.ledger._claims",
    "copy_ledger": "nexus.ledger._copy",
    "Copied": "nexus.ledger._copy",
    "full_disk": "nexus.ledger._disk",
    "read_only_place": "nexus.ledger._disk",
    "fork_session": "nexus.ledger.forks",
    "TurnNotInHistory": "nexus.ledger.forks",
    "is_postgres_url": "nexus.ledger.postgres",
    "location_problem": "nexus.ledger.postgres",
    "redacted": "nexus.ledger.postgres",
    "RunEventLog": "nexus.ledger.postgres._run_events",
    "StoredEvent": "nexus.ledger.postgres._run_events",
    "label_problem": "nexus.ledger.labels",
    "holdings": "nexus.ledger._health",
    "integrity_problems": "nexus.ledger._health",
    "migrate_database": "nexus.ledger._admin",
    "pi_session_text": "nexus.ledger.pi_jsonl",
    "pid_alive": "nexus.ledger._owners",
    "wait_bound": "nexus.ledger._sqlite",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
