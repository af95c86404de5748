"""Capture every provider response to a file, so that a bug report can be replayed as a test.

Set ``NEXUS_CAPTURE_DIR=dir`` (or ``capture_dir`` in ``nexus.toml``, or call
:func:`set_capture_dir`) and each HTTP exchange with a provider is saved as one
``*.capture`` file: a first line of JSON metadata (method, URL, status, request and
response headers, request body), then the response body exactly as the client decoded
it. ``nexus.testing.steps.replay(path)`` serves such a file back from
``FakeProviderServer`` byte for byte.

Secrets never reach the file: headers and query parameters that carry credentials are
replaced by ``[redacted]``, and every credential value seen in them, or known to the
process (set in an environment variable named like a key — ``*_API_KEY``, ``*_TOKEN`` … —
or registered as configured; see :mod:`nexus.llm.redact`, the one redactor), is cut out of
the whole file, the response body included.

This module is light (no httpx); the client that records lives in ``nexus.llm._capture``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus._lazy import LazyPattern
from nexus.llm.redact import REDACTED, scrub, secret_name

ENV_VAR = "NEXUS_CAPTURE_DIR"
"""The environment variable that switches capture on (it wins over :func:`set_capture_dir`)."""

FORMAT = "nexus-capture/1"
"""The ``format`` field of every capture's metadata line."""

_SECRET_RESPONSE = LazyPattern(r"cookie|authori[sz]ation|(?:^|-)(?:api-?key|token|secret)$", re.IGNORECASE)

_configured: Path | None = None


class CaptureFormatError(ValueError):
    """A file is not a readable capture; the message names the file and what is wrong."""


def set_capture_dir(path: str | os.PathLike[str] | None) -> None:
    """Capture to ``path`` from the next request on (``None`` stops); ``$NEXUS_CAPTURE_DIR`` still wins."""
    global _configured
    _configured = Path(path).expanduser() if path is not None else None


def capture_dir() -> Path | None:
    """Where responses are captured right now, or ``None`` when capture is off."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw:
        return Path(raw).expanduser()
    return _configured


@dataclass(slots=True)
class CaptureRecord:
    """One captured exchange: the request's metadata and the response's bytes.

    ``error`` is set when the exchange did not end normally (the connection failed or was
    cut); ``body`` then holds what arrived before.
    """

    method: str
    url: str
    status: int | None
    response_headers: dict[str, str] = field(default_factory=dict)
    request_headers: dict[str, str] = field(default_factory=dict)
    request: Any = None
    body: bytes = b""
    error: str | None = None
    captured_at: str = ""

    @property
    def content_type(self) -> str:
        """The response's media type, lower-cased, without parameters."""
        for name, value in self.response_headers.items():
            if name.lower() == "content-type":
                return value.split(";", 1)[0].strip().lower()
        return ""

    def to_bytes(self) -> bytes:
        """The file form: one line of JSON metadata, then the body."""
        meta = {
            "format": FORMAT,
            "captured_at": self.captured_at,
            "method": self.method,
            "url": self.url,
            "status": self.status,
            "error": self.error,
            "response_headers": self.response_headers,
            "request_headers": self.request_headers,
            "request": self.request,
        }
        return json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n" + self.body


def load_capture(path: str | os.PathLike[str]) -> CaptureRecord:
    """Read a ``.capture`` file; :class:`CaptureFormatError` (naming the file) if it is not one."""
    where = Path(path)
    try:
        data = where.read_bytes()
    except OSError as exc:
        raise CaptureFormatError(f"cannot read capture {where}: {exc.strerror or exc}") from exc
    head, newline, body = data.partition(b"\n")
    try:
        meta = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CaptureFormatError(f"{where} is not a capture: its first line is not JSON ({exc})") from exc
    if not newline or not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CaptureFormatError(f"{where} is not a capture: the first line must be JSON with format {FORMAT!r}")
    status = meta.get("status")
    if status is not None and not isinstance(status, int):
        raise CaptureFormatError(f"{where}: status must be an integer or null, got {status!r}")
    return CaptureRecord(
        method=str(meta.get("method") or "POST"),
        url=str(meta.get("url") or ""),
        status=status,
        response_headers={str(k): str(v) for k, v in (meta.get("response_headers") or {}).items()},
        request_headers={str(k): str(v) for k, v in (meta.get("request_headers") or {}).items()},
        request=meta.get("request"),
        body=body,
        error=meta.get("error"),
        captured_at=str(meta.get("captured_at") or ""),
    )


# --------------------------------------------------------------------------- redaction


def redact_headers(headers: Iterable[tuple[str, str]], secrets: set[str], response: bool = False) -> dict[str, str]:
    """Headers with credential values replaced; the values found are added to ``secrets``.

    Response headers are judged more narrowly (cookies, auth), so that rate-limit headers
    such as ``x-ratelimit-remaining-tokens`` stay readable in a bug report.
    """
    out: dict[str, str] = {}
    for name, value in headers:
        if _SECRET_RESPONSE.search(name) if response else secret_name(name):
            secrets.add(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                secrets.add(token)
            out[name] = REDACTED
        else:
            out[name] = value
    return out


def scrub_json(value: Any, secrets: set[str]) -> Any:
    """A JSON value with credential-named fields redacted and secret values cut out of every string."""
    if isinstance(value, dict):
        return {k: REDACTED if _secret_field(k, v) else scrub_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, secrets) for v in value]
    if isinstance(value, str):
        return scrub(value.encode("utf-8"), secrets).decode("utf-8")
    return value


def _secret_field(name: str, value: Any) -> bool:
    # only string values: ``max_tokens`` or ``prompt_cache_key`` hold no credential worth hiding
    lowered = name.lower()
    return isinstance(value, str) and lowered in ("api_key", "apikey", "key", "token", "secret", "password")


__all__ = [
    "ENV_VAR",
    "FORMAT",
    "CaptureFormatError",
    "CaptureRecord",
    "capture_dir",
    "load_capture",
    "set_capture_dir",
]
