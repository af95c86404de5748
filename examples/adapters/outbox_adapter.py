#!/usr/bin/env python3
"""A complete Nexus adapter in one stdlib-only file: the protocol of docs/adapters.md, nothing more.

It "delivers" by appending to a file and "receives" by reading lines from another file, so
it runs anywhere; replace those two functions with a platform's API and you have a real
adapter. It supports ``info``, ``send``, ``monitor`` and ``health`` but not ``stream``, so
Nexus delivers to it through the block pipeline (one ``send`` per block).

Account config (``[adapters.outbox.accounts.<id>] config = {...}`` in nexus.toml):
- ``outbox``: file every sent message is appended to (one JSON object per line);
- ``inbox``: file the monitor watches; each new line ``sender: text`` becomes a NexusEvent.

Register it from the repository root (an absolute path: nexus runs adapters from NEXUS_HOME,
so a path relative to the repository would not be found later):

    nexus adapters register outbox --command "python3 $PWD/examples/adapters/outbox_adapter.py"
    nexus adapters enable outbox/me --set outbox=/tmp/outbox.jsonl
    nexus adapters test outbox/me --to me "hello"
"""

import argparse
import json
import os
import sys
import threading
import time
import uuid


def context():
    """Settings and credentials: a JSON file whose path is in NEXUS_ADAPTER_CONTEXT_PATH (never argv)."""
    path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
    if not path:
        return {"config": {}, "credential": None}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def emit(obj):
    """One JSON value per line on stdout, flushed: Nexus reads line by line."""
    print(json.dumps(obj), flush=True)


def cmd_info(args):
    emit(
        {
            "platform": "outbox",
            "name": "outbox-example",
            "version": "1.0",
            "supports": ["send", "monitor", "health"],
            "multi_account": True,
            "platform_capabilities": {"text_limit": 2000, "supports_markdown": False},
        }
    )
    return 0


def cmd_send(args):
    outbox = context()["config"].get("outbox")
    if not outbox:
        emit(
            {
                "success": False,
                "message_ids": [],
                "chunks_sent": 0,
                "error": {"type": "unknown", "message": "no outbox configured", "retry": False},
            }
        )
        return 1
    message_id = uuid.uuid4().hex[:10]
    record = {
        "id": message_id,
        "account": args.account,
        "to": args.to,
        "thread": args.thread,
        "reply_to": args.reply_to,
        "text": args.text,
    }
    with open(outbox, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    emit({"success": True, "message_ids": [message_id], "chunks_sent": 1, "total_chars": len(args.text or "")})
    return 0


def exit_when_stdin_closes():
    """Nexus keeps a monitor's stdin open; EOF means it stopped or died: stop watching (no orphan)."""

    def watch():
        while sys.stdin.buffer.read(65536):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def cmd_monitor(args):
    inbox = context()["config"].get("inbox")
    position = 0
    exit_when_stdin_closes()
    while True:  # Nexus stops a monitor with SIGTERM (or by closing its stdin, if it died)
        if inbox and os.path.exists(inbox):
            with open(inbox, encoding="utf-8") as handle:
                handle.seek(position)
                for line in iter(handle.readline, ""):
                    if not line.endswith("\n"):
                        break  # a line still being written: read it next time
                    position += len(line.encode())
                    sender, _, text = line.rstrip("\n").partition(": ")
                    emit(
                        {
                            "event_id": f"outbox:{args.account}:{position}",
                            "timestamp": int(time.time() * 1000),
                            "content": text,
                            "content_type": "text",
                            "platform": "outbox",
                            "account_id": args.account,
                            "sender_id": sender or "unknown",
                            "container_id": sender or "unknown",
                            "container_kind": "dm",
                        }
                    )
        time.sleep(0.1)


def cmd_health(args):
    outbox = context()["config"].get("outbox", "")
    ok = bool(outbox) and os.access(os.path.dirname(os.path.abspath(outbox)), os.W_OK)
    emit({"connected": ok, "account": args.account, **({} if ok else {"error": "outbox not writable"})})
    return 0


def main():
    parser = argparse.ArgumentParser(prog="outbox_adapter")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info")
    for name in ("monitor", "health"):
        p = sub.add_parser(name)
        p.add_argument("--account", required=True)
        p.add_argument("--format", default="jsonl")
    send = sub.add_parser("send")
    send.add_argument("--account", required=True)
    send.add_argument("--to", required=True)
    send.add_argument("--thread")
    send.add_argument("--reply-to", dest="reply_to")
    send.add_argument("--text")
    args = parser.parse_args()
    return {"info": cmd_info, "send": cmd_send, "monitor": cmd_monitor, "health": cmd_health}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
