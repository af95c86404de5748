"""The Agent Broker (seed 003): named agents, durable per-session queues and their modes.

:class:`AgentBroker` takes messages (:meth:`~AgentBroker.send` → a :class:`SendReceipt` that
follows the message to the run that takes it) and runs each session's batches through the
engine's ``Runtime.start``; :mod:`nexus.broker.host` wires it to a process (the broker lock, the
deliverer of reply targets, the inbound chat monitors). See docs/broker.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.broker.broker import AgentBroker
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
from nexus.broker.settings import BrokerSettings
from nexus.broker.types import (
    AgentIdentity,
    AgentMessage,
    AgentRole,
    AgentSpecError,
    AgentState,
    BrokerError,
    QueueFullError,
    RegisteredAgent,
    SendAndWaitResult,
    SendReceipt,
    UnknownAgentError,
    new_message_id,
)

__all__ = [
    "DROP_POLICIES",
    "MAX_CONTENT_CHARS",
    "MAX_KEY_CHARS",
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
    "Followed",
    "InboundRouter",
    "QueueFullError",
    "QueueMode",
    "QueueOverrides",
    "QueueSettings",
    "QueueSettingsError",
    "QueuedMessage",
    "RegisteredAgent",
    "SendAndWaitResult",
    "SendReceipt",
    "SessionQueue",
    "SmartRouting",
    "UnknownAgentError",
    "Wait",
    "agent_problems",
    "broker_lock",
    "broker_lock_held",
    "build_host",
    "check_session_key",
    "checked_agents",
    "inbound_routes",
    "index_after_runs",
    "model_ref_problems",
    "new_message_id",
    "parse_drop_policy",
    "parse_mode",
    "plan_route",
    "resolve_settings",
    "running_broker",
    "session_label_for",
    "start_host",
    "stored_agent",
    "sync_configured_agents",
    "turn_reply",
]

if TYPE_CHECKING:
    from nexus.broker._config_check import agent_problems, model_ref_problems
    from nexus.broker.host import (
        broker_lock,
        broker_lock_held,
        build_host,
        checked_agents,
        running_broker,
        start_host,
        sync_configured_agents,
        turn_reply,
    )
    from nexus.broker.inbound import InboundRouter, inbound_routes
    from nexus.broker.sessions import MAX_KEY_CHARS, check_session_key, session_label_for
    from nexus.broker.smart import SmartRouting, index_after_runs, plan_route
    from nexus.broker.types import MAX_CONTENT_CHARS, Followed, stored_agent

_LAZY: dict[str, str] = {
    "index_after_runs": "nexus.broker.smart",
    "plan_route": "nexus.broker.smart",
    "SmartRouting": "nexus.broker.smart",
    "InboundRouter": "nexus.broker.inbound",
    "Followed": "nexus.broker.types",
    "MAX_CONTENT_CHARS": "nexus.broker.types",
    "MAX_KEY_CHARS": "nexus.broker.sessions",
    "agent_problems": "nexus.broker._config_check",
    "broker_lock": "nexus.broker.host",
    "broker_lock_held": "nexus.broker.host",
    "build_host": "nexus.broker.host",
    "check_session_key": "nexus.broker.sessions",
    "checked_agents": "nexus.broker.host",
    "inbound_routes": "nexus.broker.inbound",
    "model_ref_problems": "nexus.broker._config_check",
    "running_broker": "nexus.broker.host",
    "session_label_for": "nexus.broker.sessions",
    "start_host": "nexus.broker.host",
    "stored_agent": "nexus.broker.types",
    "sync_configured_agents": "nexus.broker.host",
    "turn_reply": "nexus.broker.host",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
