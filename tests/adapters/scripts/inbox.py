# ruff: noqa: SIM115  (a tiny test adapter: files live as long as the process)
"""An example monitor adapter: inbound events from a JSONL file, replies appended to another.

``monitor`` prints every line of ``config.inbox`` as it is (so a test can plant garbage), then
follows the file for new lines, like ``tail -f``, until its stdin closes (Nexus went away); a
restarted monitor starts from the top again (a platform offering its backlog again), which the
broker's dedupe must absorb. ``send`` appends
``{to, thread, reply_to, text}`` to ``config.outbox``. It has no ``stream``: replies take the
block path.
"""

import argparse
import json
import os
import sys
import threading
import time

ctx = json.load(open(os.environ["NEXUS_ADAPTER_CONTEXT_PATH"])) if os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH") else {}
config = ctx.get("config") or {}
command = sys.argv[1]
if command == "info":
    print(json.dumps({"platform": "inbox", "name": "inbox", "version": "1", "supports": ["send", "monitor"]}))
    sys.exit(0)
parser = argparse.ArgumentParser()
parser.add_argument("--account")
parser.add_argument("--format")
parser.add_argument("--to")
parser.add_argument("--thread")
parser.add_argument("--reply-to")
parser.add_argument("--text")
args = parser.parse_args(sys.argv[2:])
if command == "send":
    with open(config["outbox"], "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": args.to, "thread": args.thread, "reply_to": args.reply_to, "text": args.text}))
        outbox.write("\n")
    print(json.dumps({"success": True, "message_ids": [f"out-{time.monotonic_ns()}"]}))
    sys.exit(0)
if command != "monitor":
    sys.exit(2)
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()  # Nexus went away
inbox = open(config["inbox"], "rb")
pending = b""
while True:
    chunk = inbox.readline()
    if not chunk:
        time.sleep(0.02)
        continue
    pending += chunk
    if pending.endswith(b"\n"):
        sys.stdout.buffer.write(pending)
        sys.stdout.flush()
        pending = b""
