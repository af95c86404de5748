"""The live Telegram message in isolation: edits throttled to one per interval, rotation, final HTML."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.adapters.builtin._telegram_api import BotApi, TelegramError
from nexus.adapters.builtin._telegram_live import LiveMessage


class StubApi:
    """Records Bot API calls; answers like Telegram (``message_id`` counter, 'not modified' errors)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.texts: dict[int, str] = {}

    def call(self, method: str, **params: Any) -> Any:
        self.calls.append((method, params))
        if method == "sendMessage":
            message_id = len(self.texts) + 1
            self.texts[message_id] = params["text"]
            return {"message_id": message_id}
        if self.texts.get(params["message_id"]) == params["text"]:
            raise TelegramError(400, "Bad Request: message is not modified")
        self.texts[params["message_id"]] = params["text"]
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def live(api: StubApi, clock: Clock, statuses: list[dict[str, Any]]) -> LiveMessage:
    stub: BotApi = api  # type: ignore[assignment]
    return LiveMessage(stub, statuses.append, "1", thread_id=None, reply_to="9", interval_s=1.0, clock=clock)


def test_edits_are_throttled_to_one_per_interval() -> None:
    api, clock = StubApi(), Clock()
    statuses: list[dict[str, Any]] = []
    message = live(api, clock, statuses)
    for t, token in ((0.0, "a"), (0.3, "b"), (0.6, "c"), (1.1, "d"), (1.5, "e"), (2.2, "f")):
        clock.t = t
        message.token(token)
    methods = [(m, p.get("text")) for m, p in api.calls]
    assert methods == [("sendMessage", "a"), ("editMessageText", "abcd"), ("editMessageText", "abcdef")]
    assert api.calls[0][1]["reply_to_message_id"] == 9
    clock.t = 2.5
    message.token("g")
    assert message.due_in() == pytest.approx(0.7), "the pending edit is due 1 s after the last one (2.2)"
    message.finish()
    assert api.texts[1] == "abcdefg"
    assert statuses[0] == {"type": "message_created", "messageId": "1"}
    assert statuses[-2:] == [
        {"type": "message_sent", "messageId": "1", "final": True},
        {"type": "delivery_complete", "messageIds": ["1"]},
    ]


def test_a_long_reply_rotates_into_a_new_message_replying_only_once() -> None:
    api, clock = StubApi(), Clock()
    statuses: list[dict[str, Any]] = []
    message = live(api, clock, statuses)
    for i in range(1200):
        message.token(f"w{i:04d} ")
    message.finish()
    sends = [p for m, p in api.calls if m == "sendMessage"]
    assert len(sends) == 2 and sends[0]["reply_to_message_id"] == 9 and sends[1]["reply_to_message_id"] is None
    assert [s for s in statuses if s["type"] == "message_sent"] == [
        {"type": "message_sent", "messageId": "1", "final": False},
        {"type": "message_sent", "messageId": "2", "final": True},
    ]
    assert (api.texts[1] + api.texts[2]).split() == [f"w{i:04d}" for i in range(1200)]
    assert all(len(text) <= 4096 for text in api.texts.values())


def test_an_api_failure_ends_the_delivery_with_delivery_error() -> None:
    class Failing(StubApi):
        def call(self, method: str, **params: Any) -> Any:
            raise TelegramError(403, "Forbidden: bot was blocked by the user")

    statuses: list[dict[str, Any]] = []
    message = live(Failing(), Clock(), statuses)
    message.token("hello")
    message.finish()
    assert statuses == [{"type": "delivery_error", "error": "Telegram 403: Forbidden: bot was blocked by the user"}]
