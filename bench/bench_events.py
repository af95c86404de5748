"""Run events across processes on PostgreSQL: a token published in process A -> on an SSE reader's hub in process B.

Run:  .venv/bin/python bench/bench_events.py [--samples 200] [--burst 20000] [--postgres URL]

Process A (this one) publishes through its :class:`EventRelay` (20 ms batches into ``run_events``, one
NOTIFY per batch); process B tails the log into its hub and prints when each event reached it (one
machine: one clock). Two measures: **latency**, one token every 50 ms (a model streaming slowly: each
token is a "first token" of its batch), A's publish -> B's hub, p50/p99, next to the same event reaching
A's own hub (its readers pay the batch too); and **throughput**, ``--burst`` tokens published as fast as
the loop allows, until B has them all: events/s and how many transactions carried them.
Without ``--postgres`` a throwaway cluster is started with scripts/postgres.sh (and stopped after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _machine
from bench_ledger_backends import start_postgres

from nexus.ledger import Ledger
from nexus.server._event_hub import EventHub
from nexus.server._event_relay import EventRelay

ROOT = Path(__file__).resolve().parents[1]


async def _started(ledger: Ledger) -> EventRelay:
    events = ledger.run_events
    assert events is not None
    relay = EventRelay(EventHub(heartbeat_seconds=3600, retention_events=1_000_000), events)
    await relay.start()
    return relay


async def serve(url: str) -> None:
    """Process B: print ``{"sent": ns, "got": ns}`` for every event its hub receives."""
    async with await Ledger.connect(url) as ledger:
        relay = await _started(ledger)
        subscription = relay.hub.subscribe("s")
        print("ready", flush=True)
        while (frames := await subscription.next()) is not None:
            got = time.time_ns()
            for line in frames.decode().splitlines():
                if line.startswith("data: "):
                    print(json.dumps({"sent": json.loads(line[6:])["sent"], "got": got}), flush=True)


class Reader:
    """Process B and a thread reading what it prints."""

    def __init__(self, url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", url], env=env, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.got: queue.Queue[dict[str, int]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.got.put(json.loads(line))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


async def latency(url: str, reader: Reader, samples: int) -> tuple[list[float], list[float]]:
    """(A -> B ms, A -> A's own hub ms) per token, one token every 50 ms."""
    remote: list[float] = []
    local: list[float] = []
    async with await Ledger.connect(url) as ledger:
        relay = await _started(ledger)
        own = relay.hub.subscribe("s")
        for _ in range(samples):
            sent = time.time_ns()
            relay.publish("s", "token", {"text": "x", "sent": sent})
            await own.next()
            local.append((time.time_ns() - sent) / 1e6)
            event = await asyncio.to_thread(reader.got.get, True, 30)
            remote.append((event["got"] - event["sent"]) / 1e6)
            await asyncio.sleep(0.05)
        own.close()
        await relay.close()
    return remote, local


async def burst(url: str, reader: Reader, count: int) -> tuple[float, int]:
    """(events/s from the first publish to B having them all, transactions that carried them)."""
    async with await Ledger.connect(url) as ledger:
        relay = await _started(ledger)
        before = relay.batches
        start = time.perf_counter()
        for n in range(count):
            relay.publish("s", "token", {"text": "tok", "sent": n})
            if n % 200 == 199:
                await asyncio.sleep(0)  # the loop goes on between pieces, as it does between a model's chunks
        for _ in range(count):
            await asyncio.to_thread(reader.got.get, True, 60)
        seconds = time.perf_counter() - start
        batches = relay.batches - before
        await relay.close()
    return count / seconds, batches


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--burst", type=int, default=20_000)
    parser.add_argument("--postgres", metavar="URL", help="a ledger PostgreSQL database to measure")
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return
    print(_machine.header("run events: publish in process A -> the hub of process B (PostgreSQL)"))
    folder = None if args.postgres else tempfile.mkdtemp(prefix="nexus-bench-pg-")
    url = args.postgres or start_postgres(str(folder))
    if url is None:
        print("postgresql: not measured (no server could be had)")
        return
    try:
        asyncio.run(Ledger.connect(url)).close()  # the schema, once
        reader = Reader(url)
        try:
            remote, local = asyncio.run(latency(url, reader, args.samples))
            rate, batches = asyncio.run(burst(url, reader, args.burst))
        finally:
            reader.stop()
    finally:
        if folder is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "stop", folder], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{'path':<22} {'samples':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, values in (("A -> B (other process)", remote), ("A -> A (own hub)", local)):
        print(f"{name:<22} {len(values):>8} {_pct(values, 50):>8.2f} {_pct(values, 99):>8.2f} {max(values):>8.2f}")
    print(f"burst: {args.burst} events in {batches} transactions, {rate:,.0f} events/s A -> B")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
