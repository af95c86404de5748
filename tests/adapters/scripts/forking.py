# ruff: noqa: SIM115  (a tiny test adapter: files live as long as the process)
"""An adapter that leaves a child running that holds its stdout, stderr and context (``cmd &`` in a shell).

Each start appends the child's pid to ``config.pids``. ``send`` answers and exits 0; ``stream``
exits 3 at the first ``stream_start``; ``monitor`` prints one event and exits at its first
start, and at later ones prints one event and waits for stdin to close. The child sleeps long
in the adapter's process group, so only the adapter's end, not the child's, can end a read.
"""

import json
import os
import subprocess
import sys

path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
ctx = json.load(open(path, encoding="utf-8")) if path else {}
config = ctx.get("config") or {}
command = sys.argv[1]


def leave_child() -> int:
    child = subprocess.Popen(["sleep", "600"], close_fds=False)  # inherits our pipes and the context fd
    with open(config["pids"], "a", encoding="utf-8") as out:
        out.write(f"{child.pid}\n")
    return sum(1 for _ in open(config["pids"], encoding="utf-8"))


if command == "info":
    print(json.dumps({"platform": "forking", "supports": ["send", "stream", "monitor"]}))
    sys.exit(0)
starts = leave_child()
if command == "send":
    print(json.dumps({"success": True, "message_ids": ["f1"], "chunks_sent": 1}), flush=True)
elif command == "stream":
    for raw in sys.stdin:
        if json.loads(raw)["type"] == "stream_start":
            sys.exit(3)
elif command == "monitor":
    event = {
        "event_id": f"start-{starts}", "timestamp": 1_700_000_000_000, "content": "hi", "content_type": "text",
        "platform": "forking", "account_id": ctx.get("account_id"), "sender_id": "ada", "container_id": "ada",
        "container_kind": "dm",
    }  # fmt: skip
    print(json.dumps(event), flush=True)
    if starts > 1:
        sys.stdin.read()
