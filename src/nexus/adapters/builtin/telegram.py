"""The Telegram adapter: Bot API over HTTPS, as a Nexus adapter executable.

- ``send``: ``sendMessage`` in HTML (Markdown converted; plain text when Telegram refuses
  the markup), split into messages of at most 4096 characters, the first replying to
  ``--reply-to``, all in ``--thread``.
- ``stream``: a live message per delivery, edited at most every ``edit_interval_ms``
  (default 1000) with ``editMessageText``; continues in a new message past the limit.
- ``monitor``: ``getUpdates`` long polling; each text message becomes a ``NexusEvent``.
- ``health``: ``getMe``.

Account context: ``credential.value`` is the bot token; ``config.api_base`` points at another
Bot API server (the tests' loopback fake, or a local ``telegram-bot-api``).
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from typing import Any

from nexus.adapters.builtin._cli import emit, exit_when_stdin_closes, fail, main, stdin_events
from nexus.adapters.builtin._telegram_api import DEFAULT_API_BASE, BotApi, TelegramError, as_int, chat_id
from nexus.adapters.builtin._telegram_format import TELEGRAM_LIMIT, markdown_to_html, split_message
from nexus.adapters.builtin._telegram_live import LiveMessage
from nexus.adapters.context import read_context


def _api() -> tuple[BotApi, dict[str, Any]]:
    ctx = read_context()
    credential = ctx.get("credential") or {}
    token = credential.get("value") if isinstance(credential, dict) else None
    if not token:
        print('telegram: no bot token: set credential = "${TELEGRAM_BOT_TOKEN}" on the account', file=sys.stderr)
        raise SystemExit(2)
    config = ctx.get("config") or {}
    return BotApi(str(token), str(config.get("api_base") or DEFAULT_API_BASE)), config


def info(args: argparse.Namespace) -> int:
    emit(
        {
            "platform": "telegram",
            "name": "telegram",
            "version": "1.0",
            "supports": ["send", "stream", "monitor", "health"],
            "multi_account": True,
            "credential_service": "telegram-bot-token",
            "platform_capabilities": {
                "text_limit": TELEGRAM_LIMIT,
                "supports_markdown": True,
                "markdown_flavor": "telegram_html",
                "supports_code_blocks": True,
                "supports_threads": True,
                "supports_edit": True,
                "supports_streaming_edit": True,
            },
        }
    )
    return 0


def send(args: argparse.Namespace) -> int:
    if args.text is None:
        return fail("the telegram adapter sends text (--text); media is not supported yet", "content_rejected")
    api, _ = _api()
    ids: list[str] = []
    try:
        for index, piece in enumerate(split_message(args.text)):
            ids.append(_send_piece(api, chat_id(args.to), piece, args.thread, args.reply_to if index == 0 else None))
    except TelegramError as exc:
        retry_after_ms = None if exc.retry_after is None else int(exc.retry_after * 1000)
        return _partial_failure(ids, exc, retry_after_ms)
    emit({"success": True, "message_ids": ids, "chunks_sent": len(ids), "total_chars": len(args.text)})
    return 0


def _send_piece(api: BotApi, chat: str, text: str, thread: str | None, reply_to: str | None) -> str:
    params: dict[str, Any] = {
        "chat_id": as_int(chat),
        "message_thread_id": as_int(thread),
        "reply_to_message_id": as_int(reply_to),
    }
    try:
        result = api.call("sendMessage", text=markdown_to_html(text), parse_mode="HTML", **params)
    except TelegramError as exc:
        if not exc.parse_error:
            raise
        result = api.call("sendMessage", text=text, **params)
    return str(result["message_id"])


def _partial_failure(ids: list[str], exc: TelegramError, retry_after_ms: int | None) -> int:
    error: dict[str, Any] = {"type": exc.kind, "message": str(exc), "retry": exc.retryable and not ids}
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
    emit({"success": False, "message_ids": ids, "chunks_sent": len(ids), "error": error})
    return 1


def stream(args: argparse.Namespace) -> int:
    api, config = _api()
    interval = float(config.get("edit_interval_ms", 1000)) / 1000
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_read_stdin, args=(lines,), daemon=True).start()
    live: LiveMessage | None = None
    while True:
        wait = live.due_in() if live is not None else None
        try:
            event = lines.get(timeout=wait)
        except queue.Empty:
            if live is not None:
                live.tick()
            continue
        if event is None:
            return 0
        live = _on_event(api, event, live, interval)


def _on_event(api: BotApi, event: dict[str, Any], live: LiveMessage | None, interval: float) -> LiveMessage | None:
    kind = event.get("type")
    if kind == "stream_start":
        target = event.get("target") or {}
        return LiveMessage(
            api,
            emit,
            chat_id(str(target.get("to", ""))),
            thread_id=target.get("thread_id"),
            reply_to=target.get("reply_to_id"),
            interval_s=interval,
        )
    if live is None:
        print(f"telegram: {kind} outside a delivery, skipped", file=sys.stderr)
        return None
    if kind == "token":
        live.token(str(event.get("text", "")))
    elif kind == "tool_status":
        live.tool(event.get("summary") if event.get("status") == "started" else None)
    elif kind == "stream_end" and not event.get("final", True):
        live.tool(None)
    elif kind == "stream_end" or kind == "stream_error":
        note = f"\u26a0\ufe0f Response interrupted: {event.get('error')}" if kind == "stream_error" else ""
        live.finish(note)
        return None
    return live


def _read_stdin(lines: queue.Queue[dict[str, Any] | None]) -> None:
    for event in stdin_events("telegram: "):
        lines.put(event)
    lines.put(None)


def monitor(args: argparse.Namespace) -> int:
    api, config = _api()
    exit_when_stdin_closes()  # the broker went away (even SIGKILLed): stop taking its updates
    timeout = int(config.get("poll_timeout_s", 30))
    offset: int | None = None
    failures = 0
    while True:
        try:
            updates = api.call("getUpdates", offset=offset, timeout=timeout, allowed_updates=["message"])
        except TelegramError as exc:
            if exc.code in (401, 404):
                print(f"telegram: the bot token was refused ({exc.description}); fix the credential", file=sys.stderr)
                return 1
            failures += 1
            time.sleep(min(60.0, 2.0**failures))
            continue
        failures = 0
        for update in updates or []:
            offset = int(update["update_id"]) + 1
            event = _nexus_event(args.account, update)
            if event is not None:
                emit(event)


def _nexus_event(account: str, update: dict[str, Any]) -> dict[str, Any] | None:
    message = update.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("text"), str):
        return None
    chat = message.get("chat") or {}
    sender = message.get("from") or {}
    kind = {"private": "dm", "channel": "channel"}.get(str(chat.get("type")), "group")
    event: dict[str, Any] = {
        "event_id": f"telegram:{account}:{update['update_id']}",
        "timestamp": int(message.get("date", 0)) * 1000,
        "content": message["text"],
        "content_type": "text",
        "platform": "telegram",
        "account_id": account,
        "sender_id": str(sender.get("id", chat.get("id"))),
        "container_id": str(chat.get("id")),
        "container_kind": kind,
    }
    name = " ".join(str(p) for p in (sender.get("first_name"), sender.get("last_name")) if p)
    if name:
        event["sender_name"] = name
    if chat.get("title"):
        event["container_name"] = str(chat["title"])
    if message.get("message_thread_id") is not None:
        event["thread_id"] = str(message["message_thread_id"])
    reply = message.get("reply_to_message")
    if isinstance(reply, dict) and reply.get("message_id") is not None:
        event["reply_to_id"] = str(reply["message_id"])
    event["delivery_metadata"] = {"message_id": str(message.get("message_id"))}
    return event


def health(args: argparse.Namespace) -> int:
    api, _ = _api()
    try:
        me = api.call("getMe")
    except TelegramError as exc:
        emit({"connected": False, "account": args.account, "error": str(exc)})
        return 0
    emit({"connected": True, "account": f"@{me.get('username', args.account)}"})
    return 0


if __name__ == "__main__":
    sys.exit(main("telegram", {"info": info, "send": send, "stream": stream, "monitor": monitor, "health": health}))
