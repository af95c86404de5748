"""The Agent Broker (seed 003): named agents, durable per-session queues and their modes.

This package grows in steps; today it holds the queue-mode contract of DESIGN §4.6 — the
modes and their settings (:mod:`nexus.broker.modes`) and one session's queue with its cap,
drop policies, dedupe and collect format (:mod:`nexus.broker.session_queue`). See docs/broker.md.
"""

from __future__ import annotations

from nexus.broker.broker import AgentBroker, BrokerSettings, new_message_id
from nexus.broker.modes import (
    DROP_POLICIES,
    QUEUE_MODES,
    DropPolicy,
    QueueMode,
    QueueOverrides,
    QueueSettings,
    QueueSettingsError,
    parse_drop_policy,
    parse_mode,
    resolve_settings,
)
from nexus.broker.runner import AgentRunner, RunHandle, RunOutcome, RunRequest, SteerReceipt
from nexus.broker.session_queue import AddOutcome, Batch, QueuedMessage, SessionQueue, Wait
from nexus.broker.types import (
    AgentIdentity,
    AgentMessage,
    AgentRole,
    AgentSpecError,
    AgentState,
    BrokerError,
    RegisteredAgent,
    SendAndWaitResult,
    SendReceipt,
    UnknownAgentError,
)

__all__ = [
    "DROP_POLICIES",
    "QUEUE_MODES",
    "AddOutcome",
    "AgentBroker",
    "AgentIdentity",
    "AgentMessage",
    "AgentRole",
    "AgentRunner",
    "AgentSpecError",
    "AgentState",
    "Batch",
    "BrokerError",
    "BrokerSettings",
    "DropPolicy",
    "QueueMode",
    "QueueOverrides",
    "QueueSettings",
    "QueueSettingsError",
    "QueuedMessage",
    "RegisteredAgent",
    "RunHandle",
    "RunOutcome",
    "RunRequest",
    "SendAndWaitResult",
    "SendReceipt",
    "SessionQueue",
    "SteerReceipt",
    "UnknownAgentError",
    "Wait",
    "new_message_id",
    "parse_drop_policy",
    "parse_mode",
    "resolve_settings",
]
