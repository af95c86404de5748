"""The errors failover makes itself, worded for the person who reads them.

A wait longer than a run takes is not a retry: the error keeps the provider's words and adds
how long and until when (wall-clock UTC), so the user knows when to try again. A "still
cooling down" error keeps the kind of the failure that started the cooldown.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from nexus.llm import AssistantMessage, ErrorEvent, ErrorKind, Model


def failure(model: Model, kind: ErrorKind, text: str, retry_after: float | None = None) -> ErrorEvent:
    """A failure produced by failover itself (no provider call behind it)."""
    message = AssistantMessage(api=model.api, provider=model.provider, model=model.id, stop_reason="error")
    message.error_message = text
    message.error_kind = kind
    message.retry_after = retry_after
    return ErrorEvent("error", message)


def refused_error(model: Model, kinds: list[ErrorKind]) -> ErrorEvent:
    """Every key of the provider was refused earlier in the run (``kinds``: why, per key)."""
    why = "no credit left" if all(k == "billing" for k in kinds) else "rejected as invalid"
    text = (
        f"every auth profile of provider {model.provider!r} was refused earlier in this run ({why}); "
        "fix or replace the API keys"
    )
    return failure(model, kinds[-1], text)


def cooling_error(model: Model, delay: float, kind: ErrorKind | None, when: str) -> ErrorEvent:
    """Every profile cools down for longer than a run waits (after failures of earlier calls)."""
    text = (
        f"provider {model.provider!r} is cooling down after {kind or 'earlier'} errors of earlier calls: its next "
        f"key is usable in {_duration(delay)} ({when}), longer than a run waits. Try again after that, or add "
        "another key or a fallback model."
    )
    return failure(model, kind or "rate_limit", text, delay)


def too_long_error(error: ErrorEvent, delay: float, max_wait: float, when: str) -> ErrorEvent:
    """``error`` reworded: its retry would have to wait ``delay`` s, longer than the run's ``max_wait``."""
    message = error.error
    asked = message.retry_after is not None and message.retry_after >= delay - 1
    who = "the server asks to wait" if asked else "the next attempt would have to wait"
    base = (message.error_message or str(message.error_kind)).rstrip(" .")
    text = (
        f"{base}. Not retried: {who} {_duration(delay)} ({when}), longer than a run waits ({max_wait:g} s). "
        "Try again after that, or add another key or a fallback model."
    )
    return ErrorEvent("error", replace(message, error_message=text))


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.5 h``: a wait as a person reads it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def until(wall_now: float, seconds: float) -> str:
    """``until 10:32 UTC`` (with the date when it is not today)."""
    moment = datetime.fromtimestamp(wall_now + seconds, UTC)
    today = datetime.fromtimestamp(wall_now, UTC).date()
    stamp = moment.strftime("%H:%M UTC") if moment.date() == today else moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"until {stamp}"
