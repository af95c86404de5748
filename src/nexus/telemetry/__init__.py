"""Telemetry: OpenTelemetry traces, Prometheus metrics and structured logs — off, and free, by default.

Layer 0: every layer may import this package, and it imports nothing of ours. While tracing
is off, :func:`start_span` hands out one no-op span and nothing of OpenTelemetry is imported
(``import opentelemetry.trace`` alone costs ~45 ms); while metrics are off, :func:`metrics`
is a no-op recorder and ``prometheus_client`` is not imported. Turn them on with
:func:`configure` (from ``[telemetry]`` of ``nexus.toml``, what the CLI does), or, embedding
Nexus in an application that set up OpenTelemetry itself, with ``enable_tracing(provider)``.

What is traced, measured and logged, and the names: docs/observability.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.telemetry._metrics_api import NOOP_METRICS, Metrics
from nexus.telemetry._spans import NOOP_SPAN, Attributes, AttributeValue, Links, Span, SpanKind
from nexus.telemetry._switch import _on, log_ids

if TYPE_CHECKING:
    from nexus.telemetry._settings import TelemetrySettings
    from nexus.telemetry.labels import agent_label
    from nexus.telemetry.logs import configure_logging, failure_level, json_logs, logs_configured
    from nexus.telemetry.loop_lag import watch_loop_lag


_RUN_ORIGIN: ContextVar[tuple[tuple[str, ...], dict[str, Any]] | None] = ContextVar("nexus_run_origin", default=None)


class _NoContext:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_CONTEXT = _NoContext()


def tracing() -> bool:
    """Are spans recorded in this process?"""
    return _on.tracer is not None


def observing() -> bool:
    """Is anything (traces or metrics) recorded? False: instrumented paths take their untimed branch."""
    return _on.tracer is not None or _on.metrics.enabled


def capture_content() -> bool:
    """May spans carry message contents, tool arguments and results? (Off unless ``capture_content = true``.)"""
    return _on.capture_content


def metrics() -> Metrics:
    """The process's measurements (a no-op recorder while metrics are off)."""
    return _on.metrics


def start_span(
    name: str,
    *,
    kind: SpanKind = "internal",
    attributes: Attributes | None = None,
    links: Links = (),
    parent: str | None = None,
    start_time_ns: int | None = None,
) -> Span:
    """Start a span, a child of the current one (or of ``parent``, a W3C ``traceparent``); not made current.

    ``links`` are ``traceparent`` strings of related spans (the messages a run consumed).
    ``start_time_ns`` (Unix nanoseconds) backdates it, e.g. to when a queue item was accepted.
    """
    tracer = _on.tracer
    if tracer is None:
        return NOOP_SPAN
    return tracer.start_span(name, kind, attributes, links, parent, start_time_ns)


def current_span() -> Span:
    """The span current in this context (the no-op span when there is none or tracing is off)."""
    tracer = _on.tracer
    return NOOP_SPAN if tracer is None else tracer.current_span()


def use_span(span: Span) -> Any:
    """Context manager: ``span`` is the current span inside (children started there hang under it)."""
    tracer = _on.tracer
    if tracer is None or span is NOOP_SPAN:
        return _NO_CONTEXT
    return tracer.use_span(span)  # an ended span too: it is the parent of what starts inside


def continue_trace(traceparent: str | None, tracestate: str | None = None) -> Any:
    """Context manager: inside it, new spans continue the remote trace ``traceparent`` (an HTTP header)."""
    tracer = _on.tracer
    if tracer is None or not traceparent:
        return _NO_CONTEXT
    return tracer.continue_trace(traceparent, tracestate)


def current_traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` (to store with a message), or None."""
    tracer = _on.tracer
    return None if tracer is None else tracer.current_span().traceparent()


@contextmanager
def run_origin(links: Links = (), attributes: Mapping[str, AttributeValue | None] | None = None) -> Iterator[None]:
    """Runs started inside this block link ``links`` and carry ``attributes`` on their span.

    The broker wraps the start of a batch's run in it: the run's span links every message the
    batch consumed and says its queue mode. The run takes it with :func:`take_run_origin`.
    """
    if _on.tracer is None:
        yield
        return
    token = _RUN_ORIGIN.set((tuple(link for link in links if link), dict(attributes or {})))
    try:
        yield
    finally:
        _RUN_ORIGIN.reset(token)


def take_run_origin() -> tuple[tuple[str, ...], dict[str, Any]]:
    """The links and attributes a run was started with (:func:`run_origin`), cleared for this context.

    Called by the run itself, in its own task: the runs it starts in turn (sub-agents) do not inherit them.
    """
    origin = _RUN_ORIGIN.get()
    if origin is None:
        return (), {}
    _RUN_ORIGIN.set(None)
    return origin


def enable_tracing(provider: Any = None, *, capture_content: bool = False) -> None:
    """Record spans through ``provider`` (an OpenTelemetry ``TracerProvider``; None: the global one).

    For applications that set OpenTelemetry up themselves; ``nexus`` commands call
    :func:`configure` instead. ``capture_content``: spans may carry message contents.
    """
    from nexus.telemetry._otel import OtelTracer

    _on.tracer = OtelTracer(provider)
    _on.capture_content = capture_content


def enable_metrics() -> Metrics:
    """Record metrics from now on (``prometheus_client``, a registry of this process's own)."""
    if not _on.metrics.enabled:
        from nexus.telemetry._prometheus import PrometheusMetrics

        _on.metrics = PrometheusMetrics()
    return _on.metrics


def configure(settings: TelemetrySettings, *, export_timeout_s: float | None = None) -> None:
    """Turn tracing on as ``[telemetry]`` says (a no-op when ``tracing = false``: nothing is imported).

    ``export_timeout_s`` bounds one export with its retries (a one-shot command's exit waits at
    most that long for a collector that is down). Raises ``ImportError`` naming the extra to
    install when the OpenTelemetry SDK is missing.
    """
    if not settings.tracing:
        return
    from nexus.telemetry._sdk import tracer_provider

    enable_tracing(tracer_provider(settings, export_timeout_s), capture_content=settings.capture_content)


def shutdown() -> None:
    """Flush and stop what :func:`configure` started (spans still buffered are exported first)."""
    tracer = _on.tracer
    if tracer is not None:
        tracer.shutdown()


def disable() -> None:
    """Back to off: no spans, no metrics (tests use it between cases)."""
    _on.tracer = None
    _on.metrics = NOOP_METRICS
    _on.capture_content = False


__all__ = [
    "NOOP_SPAN",
    "AttributeValue",
    "Attributes",
    "Metrics",
    "Span",
    "SpanKind",
    "TelemetrySettings",
    "agent_label",
    "capture_content",
    "configure",
    "configure_logging",
    "continue_trace",
    "current_span",
    "current_traceparent",
    "disable",
    "enable_metrics",
    "enable_tracing",
    "failure_level",
    "json_logs",
    "log_ids",
    "logs_configured",
    "metrics",
    "observing",
    "run_origin",
    "shutdown",
    "start_span",
    "take_run_origin",
    "tracing",
    "use_span",
    "watch_loop_lag",
]

_LAZY: dict[str, str] = {
    "TelemetrySettings": "._settings",  # a Protocol for type checkers: a run never needs the class
    "agent_label": ".labels",
    "configure_logging": ".logs",
    "failure_level": ".logs",
    "json_logs": ".logs",
    "logs_configured": ".logs",
    "watch_loop_lag": ".loop_lag",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
