"""What is on in this process, and the trace ids a log line carries (apart from the package face, so
:mod:`nexus.telemetry.logs` reads them without importing the face that re-exports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.telemetry._metrics_api import NOOP_METRICS, Metrics

if TYPE_CHECKING:
    from nexus.telemetry._otel import OtelTracer


class _Switch:
    """What is on in this process (one per process, like OpenTelemetry's global providers)."""

    __slots__ = ("capture_content", "metrics", "tracer")

    def __init__(self) -> None:
        self.tracer: OtelTracer | None = None
        self.metrics: Metrics = NOOP_METRICS
        self.capture_content = False


_on = _Switch()


def log_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the current span, for a log line; None without one."""
    tracer = _on.tracer
    return None if tracer is None else tracer.log_ids()
