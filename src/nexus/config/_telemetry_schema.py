"""``[telemetry]`` of ``nexus.toml``: traces, metrics and logs (docs/observability.md).

Tracing is off by default and then costs nothing (no OpenTelemetry import); ``/metrics`` is on
for ``nexus serve`` (behind the server's tokens, or ``metrics_token``). Secrets (an exporter's
API key header, the metrics token) are written as ``${VAR}`` and resolved at start.
"""

from __future__ import annotations

from typing import Literal

from nexus.config._record import Record, field_check, setting


class TelemetryConfig(Record):
    """``[telemetry]``: OpenTelemetry tracing and its exporter, Prometheus metrics, the log format."""

    tracing: bool = False
    """Record spans (queue item → run → model call / tool call) and export them; needs the ``otel`` extra."""
    exporter: Literal["otlp", "console"] = "otlp"
    """``otlp``: OTLP over HTTP/protobuf to ``otlp_endpoint``; ``console``: spans as JSON on stderr."""
    otlp_endpoint: str = ""
    """The collector's base URL (``http://127.0.0.1:4318``; ``/v1/traces`` is added). Empty: the standard
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``http://localhost:4318``."""
    otlp_headers: dict[str, str] = setting(default_factory=dict)
    """Headers sent with every export (``{ "x-api-key" = "${COLLECTOR_KEY}" }``)."""
    service_name: str = setting(default="nexus", min_length=1)
    """``service.name`` of the spans."""
    sample_ratio: float = setting(default=1.0, ge=0.0, le=1.0)
    """The share of new traces recorded (a trace continued from a caller follows the caller's decision)."""
    capture_content: bool = False
    """Spans carry message contents, system instructions, tool arguments and results (redacted). Off: never."""
    metrics: bool = True
    """``nexus serve`` answers ``GET /metrics`` (Prometheus text)."""
    metrics_token: str = ""
    """A token accepted for ``/metrics`` only (a scraper needs no API token); ``${VAR}`` allowed."""
    log_format: Literal["text", "json"] = "text"
    """Log lines of the long-running commands (``nexus serve``, ``queue drain``…); ``--log-format`` wins."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """The least severe level logged; ``--log-level`` wins."""

    @field_check("otlp_endpoint")
    def _endpoint(value: str) -> str:
        from nexus.config._urls import base_url_problem

        problem = base_url_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value
