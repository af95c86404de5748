"""``[broker]`` and ``[agents.<id>]`` tables of ``nexus.toml`` (strict, like the rest of the file).

The queue-mode and drop-policy names are defined here, in the lowest layer that needs them;
``nexus.broker`` uses these same types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from nexus._lazy import LazyPattern
from nexus.config._record import Record, field_check, setting

QueueMode = Literal["steer", "followup", "collect", "steer-backlog", "queue", "interrupt"]
"""How a message is delivered while its agent is busy (DESIGN §4.6; docs/broker.md)."""

QUEUE_MODE_ALIASES: dict[str, QueueMode] = {
    "steer+backlog": "steer-backlog",
    "steering": "steer",
    "followups": "followup",
    "coalesce": "collect",
    "abort": "interrupt",
    "interrupts": "interrupt",
}
"""Other names of the queue modes, accepted wherever a mode is given (the file, ``--mode``, the API)."""

DropPolicy = Literal["old", "new", "summarize"]
"""What happens when a queue already holds ``cap`` waiting messages."""

AGENT_ID_PATTERN = LazyPattern(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RESERVED_AGENT_IDS = ("user", "system")


class QueueConfig(Record):
    """Queue settings at one level (``None`` = inherit from the next level up)."""

    _value_aliases: ClassVar[dict[str, Mapping[str, Any]]] = {"mode": QUEUE_MODE_ALIASES}

    mode: QueueMode | None = None
    debounce_ms: int | None = setting(default=None, ge=0)
    cap: int | None = setting(default=None, ge=1)
    drop_policy: DropPolicy | None = None


class BrokerConfig(Record):
    """``[broker]``: process-wide broker settings and the global queue defaults."""

    _value_aliases: ClassVar[dict[str, Mapping[str, Any]]] = {"mode": QUEUE_MODE_ALIASES}

    mode: QueueMode = "steer"
    debounce_ms: int = setting(default=1000, ge=0)
    cap: int = setting(default=20, ge=1)
    drop_policy: DropPolicy = "summarize"
    max_concurrent: int = setting(default=8, ge=1)
    max_attempts: int = setting(default=3, ge=1)
    max_hops: int = setting(default=8, ge=1)
    leases: bool | None = None
    """Each batch under its session's lease (docs/scaling.md); unset: on for PostgreSQL, off for SQLite."""
    lease_ttl_ms: int = setting(default=15_000, ge=500)
    wakeups: Literal["notify", "poll"] = "notify"
    poll_ms: int = setting(default=250, ge=10)


class AgentConfig(Record):
    """``[agents.<id>]``: a named agent registered when the broker starts."""

    role: Literal["manager", "worker"] = "worker"
    model: str | None = None
    session: str | None = setting(default=None, min_length=1)
    tools: list[str] | None = None
    system_prompt: str | None = None
    queue: QueueConfig = setting(default_factory=QueueConfig)

    @field_check("model")
    def _model_ref(value: str | None) -> str | None:
        if value is None:
            return value
        provider, sep, model_id = value.partition("/")
        if not sep or not provider.strip() or not model_id.strip():
            raise ValueError(f"expected 'provider/model' (e.g. 'openai/gpt-4o-mini'), got {value!r}")
        return value


def check_agent_ids(agents: dict[str, AgentConfig]) -> None:
    """Raise ValueError naming the first ``[agents.<id>]`` whose id is not usable."""
    for agent_id in agents:
        if not AGENT_ID_PATTERN.match(agent_id) or agent_id.lower() in RESERVED_AGENT_IDS:
            raise ValueError(
                f"agent id {agent_id!r} is not usable: use 1-64 letters, digits, '.', '_' or '-', starting with a "
                f"letter or digit, and not {' or '.join(RESERVED_AGENT_IDS)}"
            )
