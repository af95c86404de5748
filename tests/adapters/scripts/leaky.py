# ruff: noqa: SIM115  (a tiny test adapter: files live as long as the process)
"""An adapter that quotes its own credential in every error it reports, as a careless one does.

``send`` fails with it in ``error.message`` (and in a stderr line); ``stream`` reports a message,
then ``delivery_error`` with it; ``health`` is down with it in ``error``. With ``config.crash``,
``send`` and ``health`` instead print it on stderr and exit 1 without an answer.
"""

import json
import os
import sys

path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
ctx = json.load(open(path, encoding="utf-8")) if path else {}
secret = (ctx.get("credential") or {}).get("value", "")
crash = bool((ctx.get("config") or {}).get("crash"))
command = sys.argv[1]


def said(what: str) -> str:
    return f"{what}: POST https://api.leaky.test/bot{secret}/send refused token {secret}"


if command == "info":
    print(json.dumps({"platform": "leaky", "supports": ["send", "stream", "health"]}))
elif crash:
    print(said("crashed"), file=sys.stderr)
    sys.exit(1)
elif command == "send":
    print(said("debug"), file=sys.stderr)
    error = {"type": "permission_denied", "message": said("send failed"), "retry": False}
    print(json.dumps({"success": False, "message_ids": [], "chunks_sent": 0, "error": error}))
elif command == "health":
    print(json.dumps({"connected": False, "account": "a", "error": said("down")}))
elif command == "stream":
    for raw in sys.stdin:
        event = json.loads(raw)
        if event["type"] == "stream_start":
            print(json.dumps({"type": "message_created", "messageId": "m1"}), flush=True)
        elif event["type"] == "stream_error" or (event["type"] == "stream_end" and event.get("final", True)):
            print(json.dumps({"type": "delivery_error", "error": said("edit failed")}), flush=True)
