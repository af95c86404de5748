"""The OpenTelemetry SDK set up from ``[telemetry]``: a tracer provider, a sampler and one exporter.

Imported only when ``tracing = true``. The exporter is OTLP over HTTP/protobuf (any
OpenTelemetry Collector, Jaeger, Tempo, Honeycomb… accept it; no gRPC stack to install) or
``console`` (spans as JSON on stderr, for a quick look). Spans are batched and exported off the
event loop by the SDK's worker thread; the provider flushes them at exit.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus.telemetry._settings import TelemetrySettings

INSTALL_HINT = "pip install 'nexus-broker[otel]'"
TRACES_PATH = "/v1/traces"
_TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")


def tracer_provider(settings: TelemetrySettings, export_timeout_s: float | None = None) -> Any:
    """A ``TracerProvider`` exporting as ``settings`` say (``ImportError`` naming the extra when missing).

    ``export_timeout_s`` bounds one export, its retries included (None: ``OTEL_EXPORTER_OTLP_TIMEOUT``
    or 10 s); a one-shot command passes a short one, so a collector that is down delays its exit
    by that much, not by ten seconds.
    """
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as exc:
        raise ImportError(f"[telemetry] tracing = true needs the OpenTelemetry SDK: {INSTALL_HINT} ({exc})") from None
    from nexus import __version__

    resource = Resource.create({"service.name": settings.service_name, "service.version": __version__})
    sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_exporter(settings, export_timeout_s)))
    return provider


def _exporter(settings: TelemetrySettings, timeout_s: float | None) -> Any:
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ImportError(f"[telemetry] exporter = 'otlp' needs the OTLP exporter: {INSTALL_HINT} ({exc})") from None
    endpoint = traces_url(settings.otlp_endpoint) if settings.otlp_endpoint else None
    if timeout_s is None or any(os.environ.get(name) for name in _TIMEOUT_VARIABLES):  # the standard ones win
        return OTLPSpanExporter(endpoint=endpoint, headers=dict(settings.otlp_headers) or None)
    return OTLPSpanExporter(endpoint=endpoint, headers=dict(settings.otlp_headers) or None, timeout=timeout_s)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base address (``http://host:4318`` → ``…/v1/traces``)."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH
