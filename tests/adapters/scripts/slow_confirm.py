# ruff: noqa: SIM115  (tiny test adapters: files live as long as the process)
"""A stream adapter that shows the reply at once but confirms it (``delivery_complete``) ``config.delay`` s later.

Like a platform whose final edit is slow to acknowledge: the text reached the user early, the
confirmation comes late, within the router's own wait for it. With ``config.exit``, it exits with that
code instead of confirming (the text was shown: a partial delivery). ``config.ids`` (a JSON list) are the
message ids it reports, as a platform gives them.
"""

import json
import os
import sys
import time

if sys.argv[1] == "info":
    print(json.dumps({"platform": "slow", "supports": ["stream"]}))
    sys.exit(0)
ctx = json.load(open(os.environ["NEXUS_ADAPTER_CONTEXT_PATH"]))
delay = float(ctx["config"].get("delay", "0"))
exit_code = ctx["config"].get("exit")
ids = json.loads(ctx["config"].get("ids", '["slow-1"]'))


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    event = json.loads(line)
    if event.get("type") == "stream_start":
        emit({"type": "message_created", "messageId": ids[0]})
    elif event.get("type") == "stream_error" or (event.get("type") == "stream_end" and event.get("final", True)):
        time.sleep(delay)
        if exit_code is not None:
            sys.exit(int(exit_code))
        emit({"type": "delivery_complete", "messageIds": ids})
