# ruff: noqa: SIM113, SIM115  (tiny test adapters: files live as long as the process)
"""A stream adapter that records every stdin line to ``config.record`` and answers like a real one.

Used to check what reaches an adapter: the exact lines, in order, per account. ``config.die_after``
makes it exit (code 3) after that many lines, to test a process dying mid-delivery; a
``config.garbage`` value makes it print that text before every status line.
"""

import json
import os
import sys

ctx = json.load(open(os.environ["NEXUS_ADAPTER_CONTEXT_PATH"])) if os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH") else {}
config = ctx.get("config") or {}
command = sys.argv[1]
if command == "info":
    print(
        json.dumps(
            {"platform": "recorder", "name": "recorder", "version": "1", "supports": ["stream", "send", "health"]}
        )
    )
    sys.exit(0)
if command == "health":
    print(json.dumps({"connected": True, "account": sys.argv[3]}))
    sys.exit(0)
if command != "stream":
    sys.exit(2)
record = open(config["record"], "a", encoding="utf-8")
die_after = int(config.get("die_after", 0))
garbage = config.get("garbage")
garbage_repeat = int(config.get("garbage_repeat", 1))
silent = bool(config.get("silent"))
seen = 0
message = None
ids: list[str] = []


def status(obj: dict[str, object]) -> None:
    if silent:
        return
    if garbage:
        sys.stdout.write((garbage + "\n") * garbage_repeat)
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    record.write(line)
    record.flush()
    seen += 1
    if die_after and seen >= die_after:
        sys.exit(3)
    event = json.loads(line)
    kind = event["type"]
    if kind == "stream_start":
        message, ids = None, []
    elif kind == "token" and message is None:
        message = f"m{seen}"
        ids.append(message)
        status({"type": "message_created", "messageId": message})
    elif kind == "stream_error" or (kind == "stream_end" and event.get("final", True)):
        status({"type": "delivery_complete", "messageIds": ids})
