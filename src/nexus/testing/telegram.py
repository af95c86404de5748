"""``FakeTelegram``: a loopback Telegram Bot API for testing adapters without the network.

It speaks the real wire format (``POST /bot<token>/<method>`` with a JSON body, answers
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description",
"parameters": {"retry_after"}}``) for ``getMe``, ``getUpdates`` (long polling),
``sendMessage``, ``editMessageText`` and ``deleteMessage``, and enforces what real Telegram
does: the token, the 4096-character limit, HTML that must parse ("can't parse entities"),
"message is not modified". Tests queue inbound messages with :meth:`push_message` and
failures with :meth:`fail_next`, then read :attr:`calls` and :attr:`messages`::

    with FakeTelegram(token="123:abc") as tg:
        ...  # point the adapter's config.api_base at tg.base_url
        assert tg.messages[0].text == "hello"
"""

from __future__ import annotations

import asyncio
import html
import json
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import TracebackType
from typing import Any

from nexus.testing._http_server import BackgroundHttpServer, HttpRequest, ResponseWriter

_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "code",
    "pre",
    "a",
    "tg-spoiler",
    "blockquote",
    "span",
}
LIMIT = 4096


@dataclass(slots=True)
class FakeMessage:
    """A message the bot sent, with every text it has shown (``edits[-1]`` is the current one)."""

    message_id: int
    chat_id: str
    text: str
    parse_mode: str | None
    thread_id: int | None = None
    reply_to: int | None = None
    edits: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Failure:
    method: str
    code: int
    description: str
    retry_after: int | None
    times: int


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.error: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TAGS:
            self.error = self.error or f'Unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.error = self.error or f'Can\'t find end tag corresponding to start tag "{tag}"'
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check_html(text: str) -> tuple[str | None, str]:
    """(error or None, visible text) for Telegram HTML, as strict as Telegram about tags and ``&``."""
    for i, char in enumerate(text):
        if char == "&" and not _is_entity(text, i):
            return "Bad Request: can't parse entities: unsupported entity", text
    checker = _Checker()
    checker.feed(text)
    checker.close()
    if checker.error is None and checker.stack:
        checker.error = f'Can\'t find end tag corresponding to start tag "{checker.stack[-1]}"'
    if checker.error:
        return f"Bad Request: can't parse entities: {checker.error}", text
    return None, "".join(checker.text)


def _is_entity(text: str, i: int) -> bool:
    end = text.find(";", i, i + 10)
    return end > i and html.unescape(text[i : end + 1]) != text[i : end + 1]


class FakeTelegram:
    """A Bot API on 127.0.0.1 (ephemeral port) serving one bot token."""

    def __init__(
        self, token: str = "123456:TEST-TOKEN", username: str = "nexus_test_bot", *, max_poll_s: float = 1.0
    ) -> None:
        self.token = token
        self.username = username
        self.max_poll_s = max_poll_s
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: list[FakeMessage] = []
        self.reject_markup = False
        self._updates: list[dict[str, Any]] = []
        self._pushed: dict[int, dict[str, Any]] = {}
        self._polls = 0
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()
        self._next_update = 1
        self._http = BackgroundHttpServer(self._handle)

    @property
    def base_url(self) -> str:
        """Give this as ``api_base`` (the adapter appends ``/bot<token>/<method>``)."""
        return f"http://127.0.0.1:{self._http.port}"

    def start(self) -> FakeTelegram:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------------------------

    def push_message(
        self,
        text: str,
        *,
        chat_id: int = 1001,
        sender_id: int = 42,
        chat_type: str = "private",
        thread_id: int | None = None,
        first_name: str = "Ada",
    ) -> int:
        """Queue an inbound text message for ``getUpdates``; returns its update id."""
        with self._lock:
            update_id = self._next_update
            self._next_update += 1
            message: dict[str, Any] = {
                "message_id": 5000 + update_id,
                "date": int(time.time()),
                "chat": {"id": chat_id, "type": chat_type, **({"title": "Team"} if chat_type != "private" else {})},
                "from": {"id": sender_id, "is_bot": False, "first_name": first_name},
                "text": text,
            }
            if thread_id is not None:
                message["message_thread_id"] = thread_id
            self._updates.append({"update_id": update_id, "message": message})
            self._pushed[update_id] = self._updates[-1]
        return update_id

    def replay(self, update_id: int) -> None:
        """Offer an update again, as Telegram does when a bot restarts before confirming it.

        Only a ``getUpdates`` without an ``offset`` past it (a freshly started monitor) sees it; a
        poll still open with a later offset (a stopped bot's last call) confirms it away, as
        Telegram would, so replay once :attr:`polling` is 0.
        """
        with self._lock:
            self._updates.append(self._pushed[update_id])

    def fail_next(
        self,
        method: str,
        code: int = 429,
        description: str = "Too Many Requests: retry after 1",
        *,
        retry_after: int | None = 1,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with this error."""
        with self._lock:
            self._failures.append(_Failure(method, code, description, retry_after, times))

    def methods(self) -> list[str]:
        """The methods called so far, in order."""
        with self._lock:
            return [method for method, _ in self.calls]

    # -- server ------------------------------------------------------------------------------------

    async def _handle(self, request: HttpRequest, response: ResponseWriter) -> None:
        prefix = f"/bot{self.token}/"
        if not request.path.startswith("/bot"):
            await response.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        if not request.path.startswith(prefix):
            await response.send_json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        method = request.path[len(prefix) :].split("?", 1)[0]
        try:
            params = json.loads(request.body or b"{}")
        except ValueError:
            params = {}
        with self._lock:
            self.calls.append((method, params))
            failure = self._take_failure(method)
        if failure is not None:
            body: dict[str, Any] = {"ok": False, "error_code": failure.code, "description": failure.description}
            if failure.retry_after is not None:
                body["parameters"] = {"retry_after": failure.retry_after}
            await response.send_json(failure.code, body)
            return
        if method == "getUpdates":
            result: Any = await self._get_updates(params)
            await response.send_json(200, {"ok": True, "result": result})
            return
        with self._lock:
            status, answer = self._dispatch(method, params)
        await response.send_json(status, answer)

    def _take_failure(self, method: str) -> _Failure | None:
        for failure in self._failures:
            if failure.method == method and failure.times > 0:
                failure.times -= 1
                return failure
        return None

    @property
    def polling(self) -> int:
        """How many ``getUpdates`` calls are being answered now (a replay waits for 0: see :meth:`replay`)."""
        with self._lock:
            return self._polls

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + min(float(params.get("timeout") or 0), self.max_poll_s)
        with self._lock:
            self._polls += 1
        try:
            while True:
                with self._lock:
                    self._updates = [u for u in self._updates if u["update_id"] >= offset]
                    ready = list(self._updates)
                if ready or time.monotonic() >= deadline:
                    return ready
                await asyncio.sleep(0.02)
        finally:
            with self._lock:
                self._polls -= 1

    def _dispatch(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "getMe":
            return 200, {"ok": True, "result": {"id": 1, "is_bot": True, "username": self.username}}
        if method == "sendMessage":
            return self._send(params)
        if method == "editMessageText":
            return self._edit(params)
        if method == "deleteMessage":
            return 200, {"ok": True, "result": True}
        return 404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"}

    def _visible(self, params: dict[str, Any]) -> tuple[str | None, str]:
        text = str(params.get("text", ""))
        if params.get("parse_mode") == "HTML":
            if self.reject_markup:
                return "Bad Request: can't parse entities: rejected by the test", text
            error, visible = check_html(text)
            if error:
                return error, text
            text = visible
        if not text.strip():
            return "Bad Request: message text is empty", text
        if len(text) > LIMIT:
            return "Bad Request: message is too long", text
        return None, text

    def _send(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        error, _ = self._visible(params)
        if error:
            return 400, {"ok": False, "error_code": 400, "description": error}
        message = FakeMessage(
            message_id=len(self.messages) + 1,
            chat_id=str(params.get("chat_id")),
            text=str(params["text"]),
            parse_mode=params.get("parse_mode"),
            thread_id=params.get("message_thread_id"),
            reply_to=params.get("reply_to_message_id"),
            edits=[str(params["text"])],
        )
        self.messages.append(message)
        return 200, {"ok": True, "result": {"message_id": message.message_id, "chat": {"id": params.get("chat_id")}}}

    def _edit(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        index = int(params.get("message_id", 0)) - 1
        if not 0 <= index < len(self.messages):
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
        error, _ = self._visible(params)
        if error:
            return 400, {"ok": False, "error_code": 400, "description": error}
        message = self.messages[index]
        text = str(params["text"])
        if text == message.text and params.get("parse_mode") == message.parse_mode:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message is not modified"}
        message.text, message.parse_mode = text, params.get("parse_mode")
        message.edits.append(text)
        return 200, {"ok": True, "result": {"message_id": message.message_id}}
