"""From ``nexus.toml`` (``[broker]``, ``[agents.<id>]``) to broker settings and agent registrations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nexus.broker.modes import QueueOverrides, QueueSettings
from nexus.broker.settings import BrokerSettings
from nexus.broker.types import AgentIdentity
from nexus.config import AgentConfig, BrokerConfig
from nexus.engine import AgentSpec

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class ConfiguredAgent:
    """One ``[agents.<id>]`` table, ready for :meth:`AgentBroker.register_agent`."""

    identity: AgentIdentity
    spec: AgentSpec
    queue: QueueOverrides


def broker_settings(config: BrokerConfig) -> BrokerSettings:
    """The broker's settings from ``[broker]``."""
    queue = QueueSettings(
        mode=config.mode, debounce_ms=config.debounce_ms, cap=config.cap, drop_policy=config.drop_policy
    )
    return BrokerSettings(
        queue=queue,
        max_concurrent=config.max_concurrent,
        max_attempts=config.max_attempts,
        max_hops=config.max_hops,
        leases=config.leases,
        lease_ttl_ms=config.lease_ttl_ms,
        wakeups=config.wakeups,
        poll_ms=config.poll_ms,
    )


def configured_agents(agents: dict[str, AgentConfig]) -> list[ConfiguredAgent]:
    """Every ``[agents.<id>]`` table, by id."""
    out: list[ConfiguredAgent] = []
    for agent_id in sorted(agents):
        table = agents[agent_id]
        spec = AgentSpec(
            id=agent_id,
            role=table.role,
            model=table.model,
            tools=tuple(table.tools) if table.tools is not None else None,
            system_prompt=table.system_prompt or "",
        )
        queue = QueueOverrides(
            mode=table.queue.mode,
            debounce_ms=table.queue.debounce_ms,
            cap=table.queue.cap,
            drop_policy=table.queue.drop_policy,
        )
        identity = AgentIdentity(agent_id, table.session or f"agent:{agent_id}", table.role)
        out.append(ConfiguredAgent(identity, spec, queue))
    return out


@dataclass(frozen=True, slots=True)
class DeclaredKeys:
    """What one ``[agents.<id>]`` table sets in the registry: the keys it gives, nothing else.

    A table is applied as ``nexus agents add`` applies its flags (``nexus.ledger.agent_update``): the
    keys left out keep what the registry holds. An agent added with ``--tools read`` and later given a
    table that only says ``role = "manager"`` keeps its one tool (the whole table used to replace it,
    widening its tools to every tool the config allows, and the change stayed after the table was deleted).
    """

    role: str | None
    session_label: str | None
    spec: dict[str, Any]
    """The spec keys the table gives; ``None`` removes a key (an empty ``system_prompt``)."""


def declared_keys(table: AgentConfig) -> DeclaredKeys:
    """The registry keys ``table`` gives (see :class:`DeclaredKeys`)."""
    given = table.model_fields_set
    spec: dict[str, Any] = {}
    if "model" in given:
        spec["model"] = table.model
    if "tools" in given:
        spec["tools"] = list(table.tools) if table.tools is not None else None
    if "system_prompt" in given:
        spec["system_prompt"] = table.system_prompt or None
    role = table.role if "role" in given else None
    return DeclaredKeys(role, table.session if "session" in given else None, spec)
