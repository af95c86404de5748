"""The ``console`` adapter: deliveries rendered in a terminal, live when streamed.

Output goes to stderr (stdout is the protocol), or to the file named by the account's
``config.output``. Useful to watch an agent's replies from ``nexus serve`` and as the
smallest complete example of a stream-capable adapter.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import IO, Any

from nexus.adapters.builtin._cli import emit, main, stdin_events
from nexus.adapters.context import read_context

_ids = itertools.count(1)


def _output() -> IO[str]:
    config = read_context().get("config") or {}
    path = config.get("output") if isinstance(config, dict) else None
    if isinstance(path, str) and path and path != "-":
        return open(path, "a", encoding="utf-8")
    return sys.stderr


def info(args: argparse.Namespace) -> int:
    emit(
        {
            "platform": "console",
            "name": "console",
            "version": "1.0",
            "supports": ["send", "stream", "health"],
            "multi_account": True,
            "platform_capabilities": {
                "text_limit": 100_000,
                "supports_markdown": False,
                "supports_streaming_edit": True,
            },
        }
    )
    return 0


def send(args: argparse.Namespace) -> int:
    out = _output()
    out.write(f"[{args.to}] {args.text or args.caption or ''}\n")
    out.flush()
    emit(
        {
            "success": True,
            "message_ids": [f"console-{next(_ids)}"],
            "chunks_sent": 1,
            "total_chars": len(args.text or ""),
        }
    )
    return 0


def stream(args: argparse.Namespace) -> int:
    out = _output()
    current: str | None = None
    ids: list[str] = []
    chars = 0
    for event in stdin_events():
        kind = event.get("type")
        if kind == "stream_start":
            target = event.get("target") or {}
            out.write(f"--- {target.get('to', '?')} ({event.get('sessionLabel', '')})\n")
            current, chars = None, 0
        elif kind == "token":
            text = str(event.get("text", ""))
            if current is None:
                current = f"console-{next(_ids)}"
                ids.append(current)
                emit({"type": "message_created", "messageId": current})
            out.write(text)
            chars += len(text)
        elif kind == "tool_status" and event.get("status") != "completed":
            out.write(f"\n[{event.get('summary') or event.get('toolName')}...]\n")
        elif kind in ("stream_end", "stream_error"):
            _end_of_call(out, event, current)
            if kind == "stream_error" or event.get("final", True):
                emit({"type": "delivery_complete", "messageIds": ids})
                current, ids = None, []
        out.flush()
    return 0


def _end_of_call(out: IO[str], event: dict[str, Any], current: str | None) -> None:
    if event.get("type") == "stream_error":
        out.write(f"\n[interrupted: {event.get('error')}]\n")
    final = event.get("type") == "stream_error" or bool(event.get("final", True))
    if final:
        out.write("\n")
    if current is not None:
        emit({"type": "message_sent", "messageId": current, "final": final})


def health(args: argparse.Namespace) -> int:
    emit({"connected": True, "account": args.account})
    return 0


if __name__ == "__main__":
    sys.exit(main("console", {"info": info, "send": send, "stream": stream, "health": health}))
