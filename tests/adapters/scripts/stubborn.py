# ruff: noqa: SIM115  (tiny test adapters: files live as long as the process)
"""A stream adapter that ignores SIGTERM (so stopping it needs SIGKILL) and writes its pid to config.pid."""

import json
import os
import signal
import sys
import time

if sys.argv[1] == "info":
    print(json.dumps({"platform": "stubborn", "supports": ["stream"]}))
    sys.exit(0)
ctx = json.load(open(os.environ["NEXUS_ADAPTER_CONTEXT_PATH"]))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(ctx["config"]["pid"], "w").write(str(os.getpid()))
sys.stdin.close()
while True:
    time.sleep(1)
