"""Structured logs: one line per event worth a log, as text or JSON, with the trace id, never a secret.

Code logs through the standard :mod:`logging` module, naming its fields in ``extra``::

    log.info("run ended", extra={"fields": {"agent": "coder", "status": "completed", "duration_s": 1.2}})

and the process (``nexus serve`` and the other long-running commands) installs one handler with
:func:`configure_logging`. Each line then carries the time, level, logger, message, the fields,
and the ``trace_id``/``span_id`` of the span current where it was logged (when tracing is on).
Every string that leaves — the message, the fields, a traceback — passes through ``redact``
(the caller hands in :func:`nexus.llm.redact.redact`: this layer imports nothing of ours).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")

_installed: list[logging.Handler] = []
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")


def _identity(text: str) -> str:
    return text


def _timestamp(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


class _Formatter(logging.Formatter):
    """Shared by both formats: the message, the fields and the traceback, redacted; the trace ids."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def parts(self, record: logging.LogRecord) -> dict[str, Any]:
        from nexus.telemetry._switch import log_ids

        out: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": self._redact(record.getMessage()),
        }
        for key, value in _fields(record).items():
            out[key] = self._redact(value) if isinstance(value, str) else value
        ids = getattr(record, "trace_ids", None) or log_ids()
        if ids is not None:
            out["trace_id"], out["span_id"] = ids
        if record.exc_info:
            out["exception"] = self._redact(self.formatException(record.exc_info))
        return out


class JsonFormatter(_Formatter):
    """One JSON object per line (``--log-format json``)."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(self.parts(record), ensure_ascii=False, default=str)


class TextFormatter(_Formatter):
    """``2026-11-27T20:38:38.123Z warning nexus.broker: message key=value … trace_id=…`` (one line per event)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = self.parts(record)
        head = f"{parts.pop('ts')} {parts.pop('level')} {parts.pop('logger')}: {parts.pop('message')}"
        exception = parts.pop("exception", None)
        tail = " ".join(f"{key}={_text_value(value)}" for key, value in parts.items())
        line = f"{head} {tail}" if tail else head
        return f"{line}\n{exception}" if exception else line


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(text, ensure_ascii=False) if (not text or any(c in text for c in ' "=\n')) else text


def configure_logging(
    log_format: LogFormat = "text",
    level: str = "info",
    *,
    redact: Callable[[str], str] | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send ``nexus.*`` records of ``level`` and above, and every other library's warnings, to ``stream``.

    One handler on the root logger, as ``log_format`` lines (it replaces the one a previous call
    installed). Other libraries stay at ``warning`` (httpx would log every request at ``info``);
    uvicorn's loggers lose their own handlers and propagate here, so its errors are lines too
    (run uvicorn with ``log_config=None`` so it does not install them again).
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: use one of {', '.join(LOG_FORMATS)}")
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}: use one of {', '.join(LOG_LEVELS)}")
    formatter_type = JsonFormatter if log_format == "json" else TextFormatter
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter_type(redact or _identity))
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("nexus").setLevel(level.upper())
    for name in _UVICORN:
        logger = logging.getLogger(name)
        for other in list(logger.handlers):
            logger.removeHandler(other)
        logger.propagate = True
    _installed[:] = [handler]
    return handler


def failure_level(logger: logging.Logger) -> int:
    """The level of an event line that reports a failure the caller also reports in its own way.

    ``WARNING`` where logging was set up; ``INFO`` where no handler is: Python would print a
    warning raw on stderr, beside what the CLI already says about the failure.
    """
    return logging.WARNING if logger.hasHandlers() else logging.INFO


def logs_configured() -> bool:
    """Did this process install the log handler (so libraries must not install their own)?"""
    return bool(_installed)


def json_logs() -> bool:
    """Does the installed log handler write JSON lines (``--log-format json``)?"""
    return bool(_installed) and isinstance(_installed[0].formatter, JsonFormatter)
