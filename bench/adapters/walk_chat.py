#!/usr/bin/env python3
"""A chat adapter for ``bench/walk_message.py``: ``monitor`` replays an inbox file, ``stream`` records replies.

``monitor`` prints each line of ``config.inbox`` as it appears (like ``tail -f``) until its stdin
closes. ``stream`` reads StreamEvent lines; at each delivery end it appends the reply text to
``config.outbox`` and answers ``delivery_complete``. Standard library only.
"""

import json
import os
import sys
import threading
import time

ctx_path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
config = (json.load(open(ctx_path)) if ctx_path else {}).get("config") or {}  # noqa: SIM115
command = sys.argv[1]
if command == "info":
    print(json.dumps({"platform": "walk", "name": "walk", "version": "1", "supports": ["monitor", "stream"]}))
    sys.exit(0)
if command == "monitor":
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    with open(config["inbox"], "rb") as inbox:
        while True:
            line = inbox.readline()
            if not line.endswith(b"\n"):
                time.sleep(0.01)
                inbox.seek(inbox.tell() - len(line))
                continue
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
if command != "stream":
    sys.exit(2)
text: list[str] = []
for raw in sys.stdin.buffer:
    event = json.loads(raw)
    kind = event["type"]
    if kind == "token":
        text.append(event["text"])
    elif kind == "stream_error" or (kind == "stream_end" and event.get("final", True)):
        with open(config["outbox"], "a", encoding="utf-8") as outbox:
            outbox.write(json.dumps({"type": kind, "text": "".join(text)}) + "\n")
        text = []
        sys.stdout.write('{"type":"delivery_complete","messageIds":["walk-1"]}\n')
        sys.stdout.flush()
