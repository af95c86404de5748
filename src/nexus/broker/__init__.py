"""The Agent Broker (seed 003): named agents, durable per-session queues and their modes.

:class:`AgentBroker` takes messages (:meth:`~AgentBroker.send` → a :class:`SendReceipt` that
follows the message to the run that takes it) and runs each session's batches through the
engine's ``Runtime.start``; :mod:`nexus.broker.host` wires it to a process (the broker lock, the
deliverer of reply targets, the inbound chat monitors). See docs/broker.md.
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
    "SendAndWaitResult",
    "SendReceipt",
    "SessionQueue",
    "UnknownAgentError",
    "Wait",
    "new_message_id",
    "parse_drop_policy",
    "parse_mode",
    "resolve_settings",
]
