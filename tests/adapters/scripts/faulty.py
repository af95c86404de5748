# ruff: noqa: SIM115  (tiny test adapters: files live as long as the process)
"""An adapter whose ``send`` misbehaves as ``config.fault`` says (or argv[1] for ``info``).

``exit-info`` prints a good ``info`` and exits 3. Faults: ``garbage`` (prints non-JSON), ``hang`` (sleeps
forever), ``exit`` (exits 4 with a message on stderr), ``flood`` (prints 3 MiB), ``rate_limited`` (answers
rate_limited with retry_after_ms 1500 for the first ``config.failures`` calls, counted in ``config.counter``),
``record_env`` (writes its argv, environment and context-file mode to ``config.dump``), ``long_id`` (reports a
message id of 100,000 characters).
"""

import json
import os
import stat
import sys
import time

ctx_path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
ctx = json.load(open(ctx_path)) if ctx_path else {}
config = ctx.get("config") or {}
args = sys.argv[1:]
info_fault = args[0] if args and args[0] in ("garbage-info", "hang-info", "exit-info") else None
if info_fault:
    args = args[1:]
command = args[0]

if command == "info":
    if info_fault == "garbage-info":
        print("hello, I am not JSON")
        sys.exit(0)
    if info_fault == "hang-info":
        time.sleep(60)
    print(json.dumps({"platform": "faulty", "name": "faulty", "version": "1", "supports": ["send", "health"]}))
    sys.exit(3 if info_fault == "exit-info" else 0)

fault = config.get("fault", "")
if fault == "garbage":
    print("{not json at all")
elif fault == "hang":
    time.sleep(60)
elif fault == "exit":
    print("faulty: the platform refused the login", file=sys.stderr)
    sys.exit(4)
elif fault == "flood":
    chunk = "x" * 65536
    for _ in range(48):
        sys.stdout.write(chunk)
    sys.stdout.flush()
elif fault == "rate_limited":
    counter = config["counter"]
    count = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(count + 1))
    if count < int(config.get("failures", 1)):
        print(
            json.dumps(
                {
                    "success": False,
                    "message_ids": [],
                    "chunks_sent": 0,
                    "error": {"type": "rate_limited", "message": "slow down", "retry": True, "retry_after_ms": 1500},
                }
            )
        )
        sys.exit(0)
    print(json.dumps({"success": True, "message_ids": [f"ok{count}"], "chunks_sent": 1}))
elif fault == "long_id":
    print(json.dumps({"success": True, "message_ids": ["7" * 100_000], "chunks_sent": 1}))
elif fault == "record_env":
    mode = stat.S_IMODE(os.stat(ctx_path).st_mode) if ctx_path else None
    json.dump(
        {
            "argv": sys.argv,
            "env": dict(os.environ),
            "mode": mode,
            "ctx_path": ctx_path,
            "credential": ctx.get("credential"),
        },
        open(config["dump"], "w"),
    )
    print(json.dumps({"success": True, "message_ids": ["x"], "chunks_sent": 1}))
else:
    print(json.dumps({"success": True, "message_ids": ["x"], "chunks_sent": 1}))
