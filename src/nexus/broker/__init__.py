"""The Agent Broker (seed 003): named agents, durable per-session queues and their modes.

This package grows in steps; today it holds the queue-mode contract of DESIGN §4.6 — the
modes and their settings (:mod:`nexus.broker.modes`) and one session's queue with its cap,
drop policies, dedupe and collect format (:mod:`nexus.broker.session_queue`). See docs/broker.md.
"""

from __future__ import annotations

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

__all__ = [
    "DROP_POLICIES",
    "QUEUE_MODES",
    "AddOutcome",
    "Batch",
    "DropPolicy",
    "QueueMode",
    "QueueOverrides",
    "QueueSettings",
    "QueueSettingsError",
    "QueuedMessage",
    "SessionQueue",
    "Wait",
    "parse_drop_policy",
    "parse_mode",
    "resolve_settings",
]
