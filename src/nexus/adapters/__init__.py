"""Adapters: executables (any language) that connect Nexus to chat platforms (seed 004, docs/adapters.md).

- :mod:`nexus.adapters.types`: ``DeliveryTarget``, ``DeliveryResult``, ``AdapterInfo``,
  ``AdapterStreamStatus`` — the protocol's JSON shapes.
- :mod:`nexus.adapters.events`: ``NexusEvent`` (inbound, validated) and session keys.
- :class:`AdapterManager`: the configured adapters, their supervised processes, ``send``
  with retries, ``health``, ``monitor``.
- Shipped adapters under :mod:`nexus.adapters.builtin`: ``console``, ``jsonl``, ``telegram``.

Layer 6 with ``nexus.streaming``, but below it: nothing here imports from streaming.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.adapters.types import (
    CAPABILITIES,
    AdapterInfo,
    AdapterStreamStatus,
    DeliveryError,
    DeliveryResult,
    DeliveryTarget,
    HealthReport,
    ProtocolError,
)

if TYPE_CHECKING:
    from nexus.adapters._failures import clear_adapter_failure, clear_monitor_failure
    from nexus.adapters.clock import Clock, MonotonicClock
    from nexus.adapters.events import NexusEvent, parse_event, reply_target, session_key
    from nexus.adapters.manager import AdapterManager, HealthStatus
    from nexus.adapters.process import AdapterError
    from nexus.adapters.stream_client import StreamDelivery
    from nexus.adapters.supervisor import RestartPolicy

_LAZY = {
    "clear_adapter_failure": "._failures",
    "clear_monitor_failure": "._failures",  # deprecated: clear_adapter_failure
    "NexusEvent": ".events",
    "parse_event": ".events",
    "session_key": ".events",
    "reply_target": ".events",
    "AdapterManager": ".manager",
    "HealthStatus": ".manager",
    "AdapterError": ".process",
    "RestartPolicy": ".supervisor",
    "Clock": "nexus.adapters.clock",
    "MonotonicClock": "nexus.adapters.clock",
    "StreamDelivery": "nexus.adapters.stream_client",
}

__all__ = [
    "CAPABILITIES",
    "AdapterError",
    "AdapterInfo",
    "AdapterManager",
    "AdapterStreamStatus",
    "Clock",
    "DeliveryError",
    "DeliveryResult",
    "DeliveryTarget",
    "HealthReport",
    "HealthStatus",
    "MonotonicClock",
    "NexusEvent",
    "ProtocolError",
    "RestartPolicy",
    "StreamDelivery",
    "clear_adapter_failure",
    "clear_monitor_failure",
    "parse_event",
    "reply_target",
    "session_key",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
