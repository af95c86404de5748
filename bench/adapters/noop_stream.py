#!/usr/bin/env python3
"""A no-op ``stream`` adapter for the benchmarks: reads StreamEvent lines, checks the framing, answers.

For each token whose text is an integer it records ``monotonic_ns() - text`` (the time from
the router seeing the token to this process reading it; CLOCK_MONOTONIC is system-wide).
At each delivery end it appends ``{events, tokens, latencies_ns, violations}`` to
``config.stats`` and prints ``delivery_complete``.
"""

import json
import os
import sys
import time

ctx_path = os.environ.get("NEXUS_ADAPTER_CONTEXT_PATH")
ctx = json.load(open(ctx_path)) if ctx_path else {}  # noqa: SIM115
command = sys.argv[1]
if command == "info":
    print(json.dumps({"platform": "noop", "name": "noop", "version": "1", "supports": ["stream"]}))
    sys.exit(0)
stats_path = ctx["config"]["stats"]
out = sys.stdout
inside = False
events = tokens = violations = 0
latencies: list[int] = []
now = time.monotonic_ns
for line in sys.stdin.buffer:
    events += 1
    if line.startswith(b'{"type":"token"'):
        tokens += 1
        if not inside:
            violations += 1
        text = line[24:-3]
        if text.isdigit():
            latencies.append(now() - int(text))
        continue
    event = json.loads(line)
    kind = event["type"]
    if kind == "stream_start":
        if inside:
            violations += 1
        inside = True
    elif kind == "stream_error" or (kind == "stream_end" and event.get("final", True)):
        if not inside:
            violations += 1
        inside = False
        with open(stats_path, "a") as handle:
            handle.write(
                json.dumps({"events": events, "tokens": tokens, "latencies_ns": latencies, "violations": violations})
                + "\n"
            )
        events = tokens = violations = 0
        latencies = []
        out.write('{"type":"delivery_complete","messageIds":[]}\n')
        out.flush()
