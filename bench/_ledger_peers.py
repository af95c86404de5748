"""The ledger benchmark's peers: pi's JSONL session read the way pi reads it, and openai-agents' SQLiteSession.

SQLiteSession runs in the python of its own venv (nothing is installed here); without it no ratio is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _ledger_data import median, peer_turn

from nexus.llm.types import AssistantMessage


def time_pi_jsonl(path: Path, reps: int) -> tuple[float, int]:
    """Parse a pi JSONL file (json.loads every line, index by id), then walk leaf->root."""
    times = []
    count = 0
    for _ in range(reps):
        start = time.perf_counter()
        by_id: dict[str, dict[str, object]] = {}
        last = None
        with open(path, encoding="utf-8") as fh:
            next(fh)
            for line in fh:
                entry = json.loads(line)
                by_id[entry["id"]] = entry
                last = entry
        path_msgs = []
        node = last
        while node is not None:
            if node["type"] == "message":
                path_msgs.append(node["message"])
            parent = node.get("parentId")
            node = by_id.get(parent) if isinstance(parent, str) else None
        path_msgs.reverse()
        count = len(path_msgs)
        times.append((time.perf_counter() - start) * 1000)
    return median(times), count


OAI_SCRIPT = r"""
import asyncio, json, sys, time, statistics, os
from agents import SQLiteSession
items = json.load(open(sys.argv[1]))
async def main():
    out = {}
    for n in [int(x) for x in sys.argv[3].split(",")]:
        db = sys.argv[2] + f".{n}.db"
        if os.path.exists(db): os.remove(db)
        s = SQLiteSession("s", db)
        adds = []
        cpu = time.process_time()
        for i in range(0, n, 4):
            batch = items[i % len(items): i % len(items) + 4]
            t = time.perf_counter(); await s.add_items(batch); adds.append(time.perf_counter() - t)
        add_cpu_ms = (time.process_time() - cpu) / len(adds) * 1000
        s.close()
        s = SQLiteSession("s", db)
        ts = []
        for _ in range(5):
            t = time.perf_counter(); got = await s.get_items(); ts.append((time.perf_counter() - t) * 1000)
        s.close()
        out[n] = {"get_ms": statistics.median(ts), "add_ms": statistics.median(adds) * 1000, "items": len(got),
                  "add_cpu_ms": add_cpu_ms,
                  "bytes": os.path.getsize(db)}
    print(json.dumps(out))
asyncio.run(main())
"""


def oai_items(turns: int) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    for i in range(turns):
        q, r = peer_turn(i)
        call = r[0]
        assert isinstance(call, AssistantMessage)
        items.append({"role": "user", "content": q[0].content})
        items.append(
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "read",
                "arguments": json.dumps(call.tool_calls[0].arguments),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": r[1].text})  # type: ignore[union-attr]
        items.append({"role": "assistant", "content": r[2].text})  # type: ignore[union-attr]
    return items


def bench_oai(python: str, tmp: Path, counts: list[int]) -> dict[str, dict[str, float]] | None:
    if not Path(python).exists():
        return None
    items_path = tmp / "oai-items.json"
    items_path.write_text(json.dumps(oai_items(500)))
    script = tmp / "oai.py"
    script.write_text(OAI_SCRIPT)
    proc = subprocess.run(
        [python, str(script), str(items_path), str(tmp / "oai"), ",".join(map(str, counts))],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        print("openai-agents run failed:", proc.stderr[-500:], file=sys.stderr)
        return None
    result: dict[str, dict[str, float]] = json.loads(proc.stdout)
    return result


# --------------------------------------------------------------------------- report


OAI_PYTHON = "/tmp/peerbench/venv-oaiagents/bin/python"


def peer_oai(tmp: Path, args: argparse.Namespace, counts: list[int]) -> dict[str, dict[str, float]] | None:
    """SQLiteSession's numbers from this run, or None (and why) when not asked for or not installed."""
    if not args.peers:
        print("(openai-agents SQLiteSession not measured, no ratios against it: add --peers; see bench/README.md)")
        return None
    oai = bench_oai(args.oai_python, tmp, counts)
    if oai is None:
        print(f"openai-agents not measured, no ratio: no working `import agents` in {args.oai_python}")
    return oai
