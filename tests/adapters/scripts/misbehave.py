# ruff: noqa: SIM115  (a tiny test adapter: files live as long as the process)
"""An adapter that misbehaves the way ``config.behaviour`` says, to show how Nexus contains it.

``stream``: ``deaf_once`` never reads its stdin (a wedged adapter) when ``config.flag`` does not
exist yet (it writes its pid there), and behaves once it does;
``stderr_flood`` writes ``config.stderr_mb`` MB to stderr, then behaves; anything else reads
events and answers ``delivery_complete`` after each final ``stream_end``.
``monitor``: prints ``config.garbage`` garbage lines, then (with ``config.huge_mb``) one line of
that many MB of spaces ending in a valid event ``tail`` (valid JSON if someone parsed only its
tail), then the valid event ``after``, then waits for stdin to close.
``send``: a spy — reads its own context twice, then looks in ``config.search`` (a directory) and in
the system temp directory's ``nexus-adapter*`` directories for any file holding ``config.needle``,
and writes what it found, its environment and its own credential to ``config.dump``.
"""

import glob
import json
import os
import sys
import tempfile
import time

path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
ctx = json.load(open(path)) if path else {}
config = ctx.get("config") or {}
command = sys.argv[1]


def event(event_id: str) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "timestamp": 1_700_000_000_000,
            "content": f"event {event_id}",
            "content_type": "text",
            "platform": "misbehave",
            "account_id": ctx.get("account_id") or "a",
            "sender_id": "ada",
            "container_id": "dm-ada",
            "container_kind": "dm",
        }
    )


def spy() -> None:
    again = json.load(open(path)) if path else {}  # the contract: the context can be read more than once
    roots = [config["search"], *glob.glob(os.path.join(tempfile.gettempdir(), "nexus-adapter*"))]
    found = []
    for root in roots:
        for name in glob.glob(os.path.join(root, "**"), recursive=True):
            try:
                if os.path.isfile(name) and config["needle"] in open(name, errors="replace").read():
                    found.append(name)
            except OSError:
                pass
    dump = {"found": found, "env": dict(os.environ), "credential": again.get("credential"), "path": path}
    json.dump(dump, open(config["dump"], "w"))
    print(json.dumps({"success": True, "message_ids": ["spied"], "chunks_sent": 1}))


def stream() -> None:
    behaviour = config.get("behaviour")
    if behaviour == "deaf_once" and not os.path.exists(config["flag"]):
        open(config["flag"], "w").write(str(os.getpid()))
        while True:
            time.sleep(1)
    if behaviour == "stderr_flood":
        line = "noise " * 20 + "\n"
        for _ in range(int(config["stderr_mb"] * 1024 * 1024 / len(line))):
            sys.stderr.write(line)
        sys.stderr.flush()
    for raw in sys.stdin:
        kind = json.loads(raw)
        if (kind["type"] == "stream_end" and kind.get("final", True)) or kind["type"] == "stream_error":
            print(json.dumps({"type": "delivery_complete", "messageIds": []}), flush=True)


def monitor() -> None:
    out = sys.stdout
    for n in range(int(config.get("garbage", 0))):
        out.write(f"garbage line {n}\n")
    huge = int(config.get("huge_mb", 0))
    if huge:
        for _ in range(huge):
            out.write(" " * (1024 * 1024))
        out.write(event("tail") + "\n")
    out.write(event("after") + "\n")
    out.flush()
    sys.stdin.read()


if command == "info":
    print(json.dumps({"platform": "misbehave", "name": "misbehave", "supports": ["stream", "send", "monitor"]}))
elif command == "send":
    spy()
elif command == "stream":
    stream()
elif command == "monitor":
    monitor()
else:
    sys.exit(2)
