"""The command-line skeleton shared by the built-in adapters: argument parsing and JSON output.

Every adapter command reads its flags from argv (never secrets: those come from the context
file) and prints JSON on stdout; human diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

Handlers = dict[str, Callable[[argparse.Namespace], int]]


def parser(prog: str) -> argparse.ArgumentParser:
    """The protocol's commands and flags (docs/adapters.md)."""
    root = argparse.ArgumentParser(prog=prog)
    commands = root.add_subparsers(dest="command", required=True)
    commands.add_parser("info")
    for name in ("monitor", "stream", "health"):
        sub = commands.add_parser(name)
        sub.add_argument("--account", required=True)
        sub.add_argument("--format", default="jsonl", choices=["jsonl"])
    send = commands.add_parser("send")
    send.add_argument("--account", required=True)
    send.add_argument("--to", required=True)
    send.add_argument("--thread")
    send.add_argument("--reply-to", dest="reply_to")
    send.add_argument("--text")
    send.add_argument("--media")
    send.add_argument("--caption")
    return root


def emit(obj: Any) -> None:
    """Print one JSON value as a line and flush (the broker reads line by line)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message: str, kind: str = "unknown", *, retry: bool = False, retry_after_ms: int | None = None) -> int:
    """Print a failed DeliveryResult and return exit code 1."""
    error: dict[str, Any] = {"type": kind, "message": message, "retry": retry}
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
    emit({"success": False, "message_ids": [], "chunks_sent": 0, "error": error})
    return 1


def stdin_events(who: str = "") -> Iterator[dict[str, Any]]:
    """StreamEvents from stdin, one JSON object per line; bad lines are reported on stderr (after
    ``who``, e.g. ``"telegram: "``) and skipped."""
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            print(f"{who}skipped a line that is not JSON: {line[:80]!r}", file=sys.stderr)
            continue
        if isinstance(event, dict):
            yield event


def main(prog: str, handlers: Handlers, argv: list[str] | None = None) -> int:
    """Parse argv and run the command's handler; a broken pipe (the broker went away) exits quietly."""
    args = parser(prog).parse_args(argv)
    handler = handlers.get(args.command)
    if handler is None:
        print(f"{prog}: this adapter does not support {args.command!r} (see its info)", file=sys.stderr)
        return 2
    try:
        return handler(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def exit_when_stdin_closes() -> None:
    """End the process when stdin reaches EOF (for ``monitor``, which never reads it otherwise).

    Nexus keeps a monitor's stdin open while it runs; EOF means it stopped or died (a SIGKILL
    leaves no one to send SIGTERM). Without this an orphaned monitor would keep polling the
    platform — taking updates the next broker's monitor should get.
    """
    import os
    import threading

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="stdin-eof", daemon=True).start()
