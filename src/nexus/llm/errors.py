"""Classifying provider failures, and recognising context overflow.

Failover needs to know *what kind* of failure it saw (rotate the key? back off? compact
the context? give up?) while providers report it in a dozen phrasings. Classification
looks at the HTTP status first, then at the error text; ``retry_after`` comes from the
``retry-after-ms`` / ``retry-after`` headers or from "retry in N s" phrasings in the body.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping

from nexus._dataclass import dataclass
from nexus._lazy import LazyPattern
from nexus.llm.types import AssistantMessage, ErrorKind

# --------------------------------------------------------------------------- overflow

_OVERFLOW_PATTERNS = LazyPattern(
    "|".join(
        [
            r"prompt is too long",  # Anthropic
            r"input is too long for requested model",  # Bedrock
            r"exceeds the context window",  # OpenAI
            r"input token count.*exceeds the maximum",  # Gemini
            r"maximum prompt length is \d+",  # xAI
            r"reduce the length of the messages",  # Groq
            r"maximum context length is \d+ tokens",  # OpenRouter / OpenAI-compatible
            r"exceeds the limit of \d+",  # GitHub Copilot
            r"exceeds the available context size",  # llama.cpp server
            r"greater than the context length",  # LM Studio
            r"context window exceeds limit",  # MiniMax
            r"exceeded model token limit",  # Kimi
            r"too large for model with \d+ maximum context length",  # Mistral
            r"model_context_window_exceeded",  # z.ai
            r"context_window_exceeded",
            r"context[ _]length[ _]exceeded",
            r"maximum context length",
            r"exceeds (?:the )?model(?:'s)? context (?:window|length)",
            r"request_too_large",
            r"too many tokens",
            r"token limit exceeded",
            r"extra usage is required for long context",  # Anthropic 429 on 1M context
            r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",  # Cerebras
        ]
    ),
    re.IGNORECASE,
)
# Groq (and others) say "Request too large ... tokens per minute (TPM)" for rate limits; Bedrock throttles
# with "Too many tokens, please wait before trying again".
_NOT_OVERFLOW = LazyPattern(
    r"tokens per min|\btpm\b|per minute|rate limit|billing|insufficient|please wait|wait before", re.IGNORECASE
)


def is_overflow_text(text: str) -> bool:
    """True when an error text is one of the known context-overflow phrasings."""
    return bool(_OVERFLOW_PATTERNS.search(text)) and not _NOT_OVERFLOW.search(text)


def is_context_overflow(message: AssistantMessage | str, context_window: int | None = None) -> bool:
    """Did this response fail (or silently degrade) because the context was too long?

    True for an error message classified ``context_overflow`` or phrased like one (the
    phrasings of Anthropic, OpenAI, Gemini, OpenRouter, Groq, xAI, Mistral, llama.cpp,
    LM Studio …), and — with ``context_window`` — for a successful response whose
    input plus cache-read tokens exceed the window (servers that truncate silently).
    """
    if isinstance(message, str):
        return is_overflow_text(message)
    if message.stop_reason == "error":
        if message.error_kind == "context_overflow":
            return True
        return is_overflow_text(message.error_message or "")
    if context_window is not None and message.stop_reason in ("stop", "length", "tool_use"):
        if message.usage.estimated:  # our own chars/4 guess cannot show that the server truncated
            return False
        return message.usage.input + message.usage.cache_read > context_window
    return False


# --------------------------------------------------------------------------- classification


@dataclass(slots=True, frozen=True)
class ClassifiedError:
    """A provider failure reduced to what failover needs: kind, readable message, wait hint."""

    kind: ErrorKind
    message: str
    retry_after: float | None = None
    status: int | None = None


_RATE = LazyPattern(
    r"rate.?limit|too many requests|resource.?exhausted|quota exceeded|usage limit|\btpm\b|\brpm\b|"
    r"tokens per min|requests per min|(daily|weekly|monthly) limit",
    re.IGNORECASE,
)
_OVERLOADED = LazyPattern(r"overloaded|high demand|at capacity|capacity constraints|temporarily unavailable", re.I)
_TIMEOUT = LazyPattern(r"timed? ?out|timeout|deadline exceeded|etimedout", re.IGNORECASE)
# the connection itself failed (refused, reset, cut mid-reply, name not resolved): not a slow server
_NETWORK = LazyPattern(
    r"socket hang up|econnreset|econnrefused|econnaborted|eai_again|enotfound|connection (?:reset|closed|refused|"
    r"error|aborted|lost)|server disconnected|fetch failed|network (?:error|is unreachable)|peer closed connection|"
    r"name or service not known|name resolution|broken pipe",
    re.IGNORECASE,
)
_BILLING = LazyPattern(
    r"payment required|insufficient.?(?:credit|balance|funds|quota)|credit balance|billing|exceeded your current quota",
    re.IGNORECASE,
)
_AUTH_PERMANENT = LazyPattern(
    r"invalid.?api.?key|invalid x-api-key|incorrect api key|api key not valid|revoked|key (?:is )?disabled|"
    r"no such (?:user|key)|deactivated",
    re.IGNORECASE,
)
_AUTH = LazyPattern(
    r"unauthori[sz]ed|forbidden|authentication|permission denied|expired|invalid token|access denied|\b40[13]\b",
    re.IGNORECASE,
)
_API_KEY = LazyPattern(r"api.?key", re.IGNORECASE)
_FORMAT = LazyPattern(
    r"tool_use_id|string should match pattern|invalid_request|invalid request|malformed|unexpected|validation",
    re.IGNORECASE,
)
_STATUS_IN_TEXT = LazyPattern(r"\b(?:HTTP|status(?: code)?)[ :]+([45]\d\d)\b", re.IGNORECASE)
_PERIODIC = LazyPattern(r"try again|per (?:minute|hour|day)|spend limit|periodic", re.IGNORECASE)


def classify_error(
    message: str,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
) -> ClassifiedError:
    """Classify a failure from its HTTP ``status`` (if any), ``headers`` and text.

    ``message`` is the readable error text (use :func:`error_text_from_body` for raw
    bodies); ``body`` is searched too for patterns and for a retry delay.
    """
    text = message if body is None else f"{message}\n{body}"
    retry_after = parse_retry_after(headers, text)
    return ClassifiedError(_kind(status, text), message, retry_after, status)


def _kind(status: int | None, text: str) -> ErrorKind:
    if is_overflow_text(text):
        return "context_overflow"
    if status is None:
        # errors sent inside a stream have no HTTP status, but often name one ("HTTP 529")
        named = _STATUS_IN_TEXT.search(text)
        status = int(named.group(1)) if named else None
    if status is not None:
        by_status = _kind_from_status(status, text)
        if by_status is not None:
            return by_status
    for pattern, kind in (
        (_BILLING, "billing"),
        (_RATE, "rate_limit"),
        (_OVERLOADED, "overloaded"),
        (_AUTH_PERMANENT, "auth_permanent"),
        (_AUTH, "auth"),
        (_TIMEOUT, "timeout"),
        (_NETWORK, "network"),
        (_FORMAT, "format"),
    ):
        if pattern.search(text):
            return kind  # type: ignore[return-value]
    return "unknown"


def _kind_from_status(status: int, text: str) -> ErrorKind | None:
    if status in (401, 403):
        return "auth_permanent" if _AUTH_PERMANENT.search(text) else "auth"
    if status == 402:
        return "rate_limit" if _PERIODIC.search(text) else "billing"
    if status == 429:
        return "billing" if _BILLING.search(text) else "rate_limit"
    if status == 408:
        return "timeout"
    if status in (499, 503):
        return "overloaded" if _OVERLOADED.search(text) else "timeout"
    if status == 529:
        return "overloaded"
    if status >= 500:
        return "overloaded" if _OVERLOADED.search(text) else "timeout"
    if status in (400, 413, 422):
        if _BILLING.search(text):
            return "billing"
        # Gemini answers a bad or expired key with 400 INVALID_ARGUMENT
        if _AUTH_PERMANENT.search(text):
            return "auth_permanent"
        if _API_KEY.search(text) and _AUTH.search(text):
            return "auth"
        return "rate_limit" if _RATE.search(text) else "format"
    return None


# --------------------------------------------------------------------------- retry-after

_RETRY_IN_TEXT = LazyPattern(
    r"(?:retry|try again)(?: after| in)?\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?)\b",
    re.IGNORECASE,
)
_RETRY_DELAY_JSON = LazyPattern(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def parse_retry_after(headers: Mapping[str, str] | None, text: str = "") -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, ``retry-after`` (seconds or date), or text."""
    if headers:
        lowered = {k.lower(): v for k, v in headers.items()}
        raw_ms = lowered.get("retry-after-ms")
        if raw_ms:
            try:
                return max(0.0, float(raw_ms) / 1000.0)
            except ValueError:
                pass
        raw = lowered.get("retry-after")
        if raw:
            seconds = _parse_retry_header(raw)
            if seconds is not None:
                return seconds
    if not text:
        return None
    match = _RETRY_DELAY_JSON.search(text)
    if match:
        return float(match.group(1))
    match = _RETRY_IN_TEXT.search(text)
    if match:
        value, unit = float(match.group(1)), match.group(2).lower()
        if unit.startswith("ms") or unit.startswith("milli"):
            return value / 1000.0
        if unit.startswith("m"):
            return value * 60.0
        return value
    return None


def _parse_retry_header(raw: str) -> float | None:
    try:
        return max(0.0, float(raw.strip()))
    except ValueError:
        pass
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# --------------------------------------------------------------------------- bodies

_TITLE = LazyPattern(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAGS = LazyPattern(r"<[^>]+>")


def error_text_from_body(status: int | None, body: str) -> str:
    """A readable one-line error from a response body: JSON error fields, HTML title, or text."""
    prefix = f"{status} " if status is not None else ""
    stripped = body.strip()
    if not stripped:
        return f"{prefix}status code (no body)".strip()
    try:
        data = json.loads(stripped)
    except ValueError:
        data = None
    if data is not None:
        found = _message_from_json(data)
        if found:
            return f"{prefix}{found}".strip()
    if stripped.startswith("<") or "<html" in stripped[:200].lower():
        title = _TITLE.search(stripped)
        words = title.group(1) if title else _TAGS.sub(" ", stripped)
        summary = " ".join(words.split())[:200]
        return f"{prefix}HTML error page: {summary}".strip()
    return f"{prefix}{' '.join(stripped.split())[:500]}".strip()


def _message_from_json(data: object) -> str | None:
    if isinstance(data, list) and data:
        return _message_from_json(data[0])
    if not isinstance(data, dict):
        return None
    err = data.get("error", data)
    if isinstance(err, str):
        return err
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or err.get("detail")
        code = err.get("type") or err.get("code") or err.get("status")
        if isinstance(msg, str):
            return f"{code}: {msg}" if isinstance(code, str) and code not in msg else msg
        if isinstance(code, str):
            return code
    detail = data.get("detail") or data.get("message")
    return detail if isinstance(detail, str) else None


__all__ = [
    "ClassifiedError",
    "classify_error",
    "error_text_from_body",
    "is_context_overflow",
    "is_overflow_text",
    "parse_retry_after",
]
