"""``BrokerSettings``: the process-wide knobs of :class:`~nexus.broker.AgentBroker` (``[broker]`` in nexus.toml).

Apart from the broker so that config mapping (:mod:`nexus.broker.from_config`) and tests build them
without the broker's imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from nexus.broker._leases import DEFAULT_TTL_MS
from nexus.broker.agent_tools import DEFAULT_MAX_HOPS
from nexus.broker.modes import QueueSettings

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Process-wide broker settings (``[broker]`` in nexus.toml)."""

    queue: QueueSettings = field(default_factory=QueueSettings)
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_hops: int = DEFAULT_MAX_HOPS
    """Asks between agents one conversation may send (the agent tools refuse more); the reply each ask is owed is
    not counted and never refused."""
    leases: bool | None = None
    """Run each batch under its session's lease (brokers sharing a database; docs/scaling.md). ``None``: on
    for a database other processes reach (PostgreSQL), off for SQLite (one broker per file)."""
    lease_ttl_ms: int = DEFAULT_TTL_MS
    """How long a lease holds unrenewed: a dead broker's sessions are taken over this long after it died."""
    wakeups: Literal["notify", "poll"] = "notify"
    """How a broker learns of messages other processes accepted: ``notify`` (PostgreSQL's LISTEN, backed by
    the poll) or ``poll`` only (behind a transaction-pooling pgbouncer)."""
    poll_ms: int = 250
    """Time between two looks at the queue for other processes' messages (jittered ±50 %)."""
