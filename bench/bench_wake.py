"""Wake latency across processes on PostgreSQL: a message accepted in process A -> its run starts in process B.

Run:  .venv/bin/python bench/bench_wake.py [--samples 200] [--rounds 2] [--postgres URL]

Process B is a broker (``AgentBroker`` under leases, runs scripted: they take 10 ms and write their turn);
this process is A: it accepts one message at a time, each into an idle session, and takes the time from
``accept`` returning (the row committed) to B's run start (one machine: one clock). Two ways B learns of
the message, interleaved round by round: ``notify`` (LISTEN/NOTIFY, the 250 ms poll behind it) and
``poll`` only (what a transaction-pooling pgbouncer allows). Target (docs/scaling.md): notify p50 < 20 ms.
Without ``--postgres`` a throwaway cluster is started with scripts/postgres.sh (and stopped after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, cast

import _machine
from bench_ledger_backends import postgres_or_throwaway

from nexus.ledger import AcceptRequest, Ledger

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = 20


async def serve(url: str, wakeups: str) -> None:
    """Process B: a broker that prints the time each run starts."""
    from nexus.broker import BrokerSettings, QueueSettings
    from nexus.testing.broker_runtime import serve_broker

    def said(event: str, fields: dict[str, object]) -> None:
        print(json.dumps({"event": event, "ns": time.time_ns(), **fields}), flush=True)

    settings = BrokerSettings(queue=QueueSettings(mode="followup"), leases=True, wakeups=cast(Any, wakeups))
    await serve_broker(url, settings, 0.01, said)


class Broker:
    """Process B, its run events read by a thread as they come."""

    def __init__(self, url: str, wakeups: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", url, "--wakeups", wakeups], env=env, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait(self, kind: str, item_id: str) -> int:
        """The time (ns) of the run event ``kind`` of the run that took ``item_id``."""
        while True:
            event = self.events.get(timeout=60)
            if event["event"] == kind and item_id in event["items"]:
                return int(event["ns"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


async def setup(url: str) -> None:
    async with await Ledger.connect(url) as ledger:
        for n in range(SESSIONS):
            await ledger.agents.save(f"w{n}", role="worker", session_label=f"agent:w{n}", spec={})


async def measure(url: str, broker: Broker, samples: int) -> list[float]:
    """Latencies (ms) from accept to run start, one message at a time into an idle session."""
    out: list[float] = []
    async with await Ledger.connect(url) as ledger:
        for n in range(samples):
            agent = f"w{n % SESSIONS}"
            message_id = uuid.uuid4().hex
            body = {"id": message_id, "from": "user", "to": agent, "content": "hi"}
            item, _ = await ledger.queue.accept(
                AcceptRequest(agent, f"agent:{agent}", message_id, "user", body, "followup")
            )
            accepted = time.time_ns()
            started = await asyncio.to_thread(broker.wait, "start", item.id)
            out.append((started - accepted) / 1e6)
            await asyncio.to_thread(broker.wait, "end", item.id)
            await asyncio.sleep(0.02)  # the session's lease is released: it is idle again
    return out


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres", metavar="URL", help="an empty-or-ledger PostgreSQL database to measure")
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--wakeups", default="notify", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.wakeups))
        return
    print(_machine.header("wake latency: accept in process A -> run start in process B (PostgreSQL)"))
    results: dict[str, list[float]] = {"notify": [], "poll": []}
    with postgres_or_throwaway(args.postgres) as url:
        if url is None:
            print("postgresql: not measured (no server could be had)")
            return
        asyncio.run(setup(url))
        for _ in range(args.rounds):  # interleaved: each round measures both
            for mode in results:
                broker = Broker(url, mode)
                try:
                    results[mode] += asyncio.run(measure(url, broker, args.samples))
                finally:
                    broker.stop()
    print(f"{'wake-up':<8} {'samples':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for mode, values in results.items():
        print(f"{mode:<8} {len(values):>8} {_pct(values, 50):>8.2f} {_pct(values, 99):>8.2f} {max(values):>8.2f}")
    ratio = _pct(results["poll"], 50) / max(_pct(results["notify"], 50), 1e-9)
    print(f"poll / notify p50: {ratio:.1f}x   target: notify p50 < 20 ms")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
