"""One streamed Telegram reply: ``sendMessage`` once, then ``editMessageText`` at most every ~1 s.

While tokens arrive the message shows plain text (half-written Markdown would not parse),
with a status line while a tool runs. Past the limit the message is finished and the rest
continues in a new message. At the end every message gets its final edit in HTML, or plain
text when Telegram refuses the markup. Each step reports an ``AdapterStreamStatus`` line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nexus.adapters.builtin._telegram_api import BotApi, TelegramError, as_int
from nexus.adapters.builtin._telegram_format import TELEGRAM_LIMIT, best_cut, markdown_to_html

Emit = Callable[[dict[str, Any]], None]
_PREVIEW_LIMIT = TELEGRAM_LIMIT - 200  # room for the status line


class LiveMessage:
    """The messages of one delivery and the edits that keep them current."""

    def __init__(
        self,
        api: BotApi,
        emit: Emit,
        chat: str,
        *,
        thread_id: str | None,
        reply_to: str | None,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.emit = emit
        self.chat = chat
        self.thread_id = thread_id
        self.reply_to = reply_to
        self.interval_s = interval_s
        self.clock = clock
        self.ids: list[str] = []
        self.current: str | None = None  # the message being edited; None = the next preview sends a new one
        self.text = ""  # the current message's text
        self.status = ""
        self.shown = ""
        self.last_edit = float("-inf")
        self.error: str | None = None

    # -- events ---------------------------------------------------------------------------------

    def token(self, text: str) -> None:
        self.text += text
        while len(self.text) > _PREVIEW_LIMIT:
            cut = best_cut(self.text, _PREVIEW_LIMIT)
            head, self.text = self.text[:cut], self.text[cut:]
            self._finish_message(head, final=False)
        self.tick()

    def tool(self, summary: str | None) -> None:
        self.status = f"\u23f3 {summary}\u2026" if summary else ""
        self.tick(force=True)

    def tick(self, force: bool = False) -> None:
        """Send or edit the preview if it changed and the throttle allows it."""
        preview = self._preview()
        if not preview.strip() or preview == self.shown:
            return
        if self.current is None:
            self._create(preview)
        elif force or self.clock() - self.last_edit >= self.interval_s:
            self._edit(self.current, preview, html=False)

    def due_in(self) -> float | None:
        """Seconds until a pending edit may go out (None when nothing is pending)."""
        if self.current is None or self._preview() == self.shown:
            return None
        return max(0.0, self.last_edit + self.interval_s - self.clock())

    def finish(self, note: str = "") -> None:
        """The final edit (HTML, plain-text fallback), then ``message_sent`` and ``delivery_complete``."""
        self.status = ""
        text = _joined(self.text, note.strip())
        if text.strip():
            self._finish_message(text, final=True)
        if self.error is not None:
            self.emit({"type": "delivery_error", "error": self.error})
        else:
            self.emit({"type": "delivery_complete", "messageIds": list(self.ids)})

    # -- API ------------------------------------------------------------------------------------

    def _preview(self) -> str:
        return _joined(self.text, self.status)

    def _create(self, text: str) -> None:
        try:
            result = self.api.call(
                "sendMessage",
                chat_id=as_int(self.chat),
                text=text,
                message_thread_id=as_int(self.thread_id),
                reply_to_message_id=None if self.ids else as_int(self.reply_to),
            )
        except TelegramError as exc:
            self.error = self.error or str(exc)
            return
        self.current = str(result["message_id"])
        self.ids.append(self.current)
        self.shown = text
        self.last_edit = self.clock()
        self.emit({"type": "message_created", "messageId": self.current})

    def _edit(self, message_id: str, text: str, *, html: bool) -> None:
        try:
            self.api.call(
                "editMessageText",
                chat_id=as_int(self.chat),
                message_id=int(message_id),
                text=markdown_to_html(text) if html else text,
                parse_mode="HTML" if html else None,
            )
        except TelegramError as exc:
            if exc.parse_error and html:
                self._edit(message_id, text, html=False)
                return
            if "not modified" not in exc.description:
                self.error = self.error or str(exc)
                return
        self.shown = text
        self.last_edit = self.clock()
        self.emit({"type": "message_updated", "messageId": message_id, "chars": len(text)})

    def _finish_message(self, text: str, *, final: bool) -> None:
        if self.current is None:
            self._create(text)
        if self.current is None:
            return
        message_id = self.current
        self._edit(message_id, text, html=len(markdown_to_html(text)) <= TELEGRAM_LIMIT)
        self.emit({"type": "message_sent", "messageId": message_id, "final": final})
        self.current, self.shown = None, ""


def _joined(text: str, line: str) -> str:
    """``text``, then a blank line and ``line`` (a status, a note); just ``line`` when there is no text yet:
    a message that starts with a tool call does not open with blank lines."""
    if not line:
        return text
    return f"{text.rstrip()}\n\n{line}" if text.strip() else line
