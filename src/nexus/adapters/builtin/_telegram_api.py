"""A small synchronous Telegram Bot API client: the calls the adapter makes, errors mapped to the protocol.

``retry_after`` (429) is honoured here, for up to 3 attempts per call and waits of at most
``max_wait_s``; a longer wait is handed back to Nexus as a ``rate_limited`` error with
``retry_after_ms`` instead of blocking the adapter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

DEFAULT_API_BASE = "https://api.telegram.org"


class TelegramError(Exception):
    """A failed Bot API call: the HTTP/API error code, Telegram's description, and ``retry_after`` if given."""

    def __init__(self, code: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(f"Telegram {code}: {description}")
        self.code = code
        self.description = description
        self.retry_after = retry_after

    @property
    def parse_error(self) -> bool:
        """Telegram refused the HTML/Markdown markup (the text can be resent as plain text)."""
        return self.code == 400 and "can't parse entities" in self.description.lower()

    @property
    def kind(self) -> str:
        """The protocol's error type for this failure."""
        if self.code == 429:
            return "rate_limited"
        if self.code in (401, 403):
            return "permission_denied"
        if self.code == 400 and "not found" in self.description.lower():
            return "not_found"
        if self.code == 400:
            return "content_rejected"
        if self.code == 0 or self.code >= 500:
            return "network"
        return "unknown"

    @property
    def retryable(self) -> bool:
        return self.kind in ("rate_limited", "network")


class BotApi:
    """``call(method, **params)`` against ``{base}/bot{token}/{method}``; returns ``result`` or raises."""

    def __init__(
        self,
        token: str,
        base: str = DEFAULT_API_BASE,
        *,
        timeout_s: float = 40.0,
        max_wait_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._url = f"{base.rstrip('/')}/bot{token}/"
        self._client = httpx.Client(timeout=timeout_s)
        self._max_wait_s = max_wait_s
        self._sleep = sleep

    def call(self, method: str, **params: Any) -> Any:
        body = {key: value for key, value in params.items() if value is not None}
        for attempt in range(3):
            try:
                return self._once(method, body)
            except TelegramError as exc:
                wait = exc.retry_after
                if exc.code != 429 or wait is None or wait > self._max_wait_s or attempt == 2:
                    raise
                self._sleep(wait)
        raise AssertionError("unreachable")

    def _once(self, method: str, body: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self._url + method, json=body)
        except httpx.HTTPError as exc:
            raise TelegramError(0, f"network error: {exc.__class__.__name__}: {exc}") from None
        try:
            data = response.json()
        except ValueError:
            raise TelegramError(response.status_code, f"not a Bot API answer (HTTP {response.status_code})") from None
        if isinstance(data, dict) and data.get("ok") is True:
            return data.get("result")
        if not isinstance(data, dict):
            raise TelegramError(response.status_code, "not a Bot API answer")
        parameters = data.get("parameters") or {}
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        code = int(data.get("error_code") or response.status_code)
        raise TelegramError(code, str(data.get("description", "")), None if retry_after is None else float(retry_after))

    def close(self) -> None:
        self._client.close()


def chat_id(to: str) -> str:
    """The chat id in a target: ``chat:<id>``, ``<id>`` or ``@channelname``."""
    return to.split(":", 1)[1] if to.startswith("chat:") else to


def as_int(value: object) -> int | str | None:
    """Message and thread ids as the integers the Bot API expects (left alone if not numeric)."""
    if value is None or value == "":
        return None
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else text
