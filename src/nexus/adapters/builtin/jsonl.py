"""The ``jsonl`` adapter: every delivery appended to a JSONL file, for tests and scripts.

The file is the account's ``config.path`` (required). ``send`` appends
``{"kind": "send", "account", "to", "thread_id", "reply_to_id", "text", "message_id"}``;
a streamed delivery appends one ``{"kind": "delivery", "account", "target", "run_id",
"text", "tools", "events", "message_id", "error"}`` line when it ends, so a reader sees whole
deliveries only. Appends take an exclusive ``flock``, so concurrent processes never interleave.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import uuid
from typing import Any

from nexus.adapters.builtin._cli import emit, fail, main, stdin_events
from nexus.adapters.context import read_context


def _path() -> str:
    config = read_context().get("config") or {}
    path = config.get("path") if isinstance(config, dict) else None
    if not isinstance(path, str) or not path:
        raise SystemExit(_no_path())
    return path


def _no_path() -> int:
    print('jsonl adapter: set config = { path = "/some/file.jsonl" } on the account', file=sys.stderr)
    return 2


def _append(path: str, record: dict[str, Any]) -> None:
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        os.close(fd)


def info(args: argparse.Namespace) -> int:
    emit(
        {
            "platform": "jsonl",
            "name": "jsonl",
            "version": "1.0",
            "supports": ["send", "stream", "health"],
            "multi_account": True,
            "platform_capabilities": {"text_limit": 1_000_000, "supports_markdown": True},
        }
    )
    return 0


def send(args: argparse.Namespace) -> int:
    if args.text is None:
        return fail("the jsonl adapter sends text only (--text)", "content_rejected")
    message_id = uuid.uuid4().hex[:12]
    record = {
        "kind": "send",
        "account": args.account,
        "to": args.to,
        "thread_id": args.thread,
        "reply_to_id": args.reply_to,
        "text": args.text,
        "message_id": message_id,
    }
    _append(_path(), record)
    emit({"success": True, "message_ids": [message_id], "chunks_sent": 1, "total_chars": len(args.text)})
    return 0


def stream(args: argparse.Namespace) -> int:
    path = _path()
    delivery: dict[str, Any] | None = None
    for event in stdin_events():
        kind = event.get("type")
        if kind == "stream_start":
            delivery = _start(args.account, event)
            continue
        if delivery is None:
            print(f"jsonl adapter: {kind} outside a delivery, skipped", file=sys.stderr)
            continue
        delivery["events"].append(kind)
        if kind == "token":
            _token(delivery, str(event.get("text", "")))
        elif kind == "reasoning":
            delivery["reasoning"] += str(event.get("text", ""))
        elif kind == "tool_status":
            delivery["tools"].append([event.get("toolName"), event.get("status"), event.get("summary")])
        elif kind == "stream_error":
            delivery["error"] = {"error": event.get("error"), "partial": event.get("partial")}
        if kind == "stream_error" or (kind == "stream_end" and event.get("final", True)):
            _finish(path, delivery)
            delivery = None
    return 0


def _start(account: str, event: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "delivery",
        "account": account,
        "target": event.get("target"),
        "run_id": event.get("runId"),
        "session_label": event.get("sessionLabel"),
        "text": "",
        "reasoning": "",
        "tools": [],
        "events": ["stream_start"],
        "message_id": None,
        "error": None,
    }


def _token(delivery: dict[str, Any], text: str) -> None:
    if delivery["message_id"] is None:
        delivery["message_id"] = uuid.uuid4().hex[:12]
        emit({"type": "message_created", "messageId": delivery["message_id"]})
    delivery["text"] += text


def _finish(path: str, delivery: dict[str, Any]) -> None:
    _append(path, delivery)
    ids = [delivery["message_id"]] if delivery["message_id"] else []
    if ids:
        emit({"type": "message_sent", "messageId": ids[0], "final": True})
    emit({"type": "delivery_complete", "messageIds": ids})


def health(args: argparse.Namespace) -> int:
    config = read_context().get("config") or {}
    path = config.get("path") if isinstance(config, dict) else None
    if not isinstance(path, str) or not path:
        emit({"connected": False, "account": args.account, "error": "no config.path set for this account"})
        return 0
    directory = os.path.dirname(os.path.abspath(path))
    ok = os.access(directory, os.W_OK)
    emit({"connected": ok, "account": args.account, **({} if ok else {"error": f"{directory} is not writable"})})
    return 0


if __name__ == "__main__":
    sys.exit(main("jsonl", {"info": info, "send": send, "stream": stream, "health": health}))
