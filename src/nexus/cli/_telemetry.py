"""Turning on what ``[telemetry]`` asks for, at a command's start (docs/observability.md).

Tracing off (the default) imports nothing: a command pays one attribute read. The long-running
commands (``nexus serve``, ``nexus queue drain``) also install the log handler: one line per
event worth a log, as text or JSON (``--log-format``), every line redacted.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig


def add_log_options(parser: argparse.ArgumentParser) -> None:
    """``--log-format`` and ``--log-level`` of a long-running command."""
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        help="log lines as text or as JSON objects (default: [telemetry])",
    )
    parser.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), help="least severe level logged (default: info)"
    )


ONE_SHOT_EXPORT_TIMEOUT_S = 2.0
"""How long a one-shot command (``run``, ``chat``, ``send``) gives an export at exit: a collector that
is down delays the exit by this much (the SDK's default would be 10 s)."""


def start_telemetry(config: NexusConfig, args: argparse.Namespace | None = None, *, logs: bool = False) -> None:
    """Tracing as ``[telemetry]`` says, and with ``logs`` the log handler (flags win over the file).

    ``logs`` marks a long-running command (``serve``, ``queue drain``): its exports get the SDK's
    full timeout; the others a short one (:data:`ONE_SHOT_EXPORT_TIMEOUT_S`).
    """
    settings = config.telemetry
    if logs:
        from nexus.llm import redact
        from nexus.telemetry import configure_logging

        log_format = getattr(args, "log_format", None) or settings.log_format
        configure_logging(log_format, getattr(args, "log_level", None) or settings.log_level, redact=redact)
    if not settings.tracing:
        return
    from nexus import telemetry
    from nexus.config import resolve_env
    from nexus.errors import ConfigError
    from nexus.llm import add_secrets

    headers = {
        name: resolve_env(value, os.environ, f"[telemetry] otlp_headers.{name}")
        for name, value in settings.otlp_headers.items()
    }
    add_secrets(headers.values())  # an exporter's key never shows in an error text or a log line
    try:
        timeout = None if logs else ONE_SHOT_EXPORT_TIMEOUT_S
        telemetry.configure(settings.model_copy(update={"otlp_headers": headers}), export_timeout_s=timeout)
    except ImportError as exc:
        raise ConfigError(str(exc)) from None


def metrics_tokens(config: NexusConfig) -> list[str]:
    """``[telemetry] metrics_token`` resolved (``${VAR}``), registered with the redactor; [] when unset."""
    token = config.telemetry.metrics_token
    if not token:
        return []
    from nexus.config import resolve_env
    from nexus.llm import add_secrets

    value = resolve_env(token, os.environ, "[telemetry] metrics_token")
    add_secrets([value])
    return [value] if value else []
