"""What :func:`nexus.telemetry.configure` reads, as a Protocol: ``nexus.config``'s ``[telemetry]`` table has
these fields, and this package imports nothing of ``nexus.config`` (both are layer 0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class TelemetrySettings(Protocol):
    """What :func:`configure` reads (``nexus.config``'s ``[telemetry]`` table has these fields)."""

    @property
    def tracing(self) -> bool: ...
    @property
    def exporter(self) -> str: ...
    @property
    def otlp_endpoint(self) -> str: ...
    @property
    def otlp_headers(self) -> Mapping[str, str]: ...
    @property
    def service_name(self) -> str: ...
    @property
    def sample_ratio(self) -> float: ...
    @property
    def capture_content(self) -> bool: ...
