"""Broker queue path alone: durable accept -> claim -> mark delivered, the engine replaced by a no-op.

Run:  .venv/bin/python bench/bench_broker_queue.py [--messages 5000] [--peers]

Target (issue "The Agent Broker"): >= 10,000 messages/s and p99 accept latency < 2 ms, ahead of
persist-queue's ``SQLiteAckQueue`` (put -> get -> ack) measured in the same run. persist-queue is
not a dependency: with ``--peers`` it is used when importable (``pip install persist-queue``);
otherwise the script says so and prints no ratio.

Both sides make every message durable before acknowledging it (one committed transaction per
accept) and keep the same three steps per message; nexus stores more per row (agent, sender,
message id for idempotence, attempts) and also writes the agent-to-agent log for half of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 100 else max(samples)


def run_nexus(directory: Path, messages: int) -> tuple[float, float]:
    """(messages per second, p99 accept ms) for accept -> claim -> deliver, one message at a time."""
    with Ledger.open(directory / "agents.db") as ledger:
        ledger.ensure_session("agent:worker")
        store = BrokerStore(ledger.database)
        accept_ms: list[float] = []
        start = time.perf_counter()
        for n in range(messages):
            t0 = time.perf_counter()
            item, _ = store.accept(
                agent_id="worker",
                session_label="agent:worker",
                message_id=f"msg-{n}",
                sender="manager" if n % 2 else "user",
                message={"content": f"message number {n}", "from": "user"},
                mode="followup",
                log_as_agent_message=bool(n % 2),
            )
            accept_ms.append((time.perf_counter() - t0) * 1000)
            store.claim([item.id])
            store.deliver([item.id], f"turn-{n}")
        elapsed = time.perf_counter() - start
    return messages / elapsed, _p99(accept_ms)


def run_persist_queue(directory: Path, messages: int) -> tuple[float, float] | None:
    """The same three steps on ``persistqueue.SQLiteAckQueue``, or ``None`` when it is not installed."""
    try:
        import persistqueue  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    queue = persistqueue.SQLiteAckQueue(str(directory / "ackq"), auto_commit=True)
    accept_ms: list[float] = []
    start = time.perf_counter()
    for n in range(messages):
        t0 = time.perf_counter()
        queue.put({"content": f"message number {n}", "from": "user"})
        accept_ms.append((time.perf_counter() - t0) * 1000)
        item = queue.get(block=False)
        queue.ack(item)
    elapsed = time.perf_counter() - start
    return messages / elapsed, _p99(accept_ms)


def _measure(fn: Callable[[Path, int], tuple[float, float] | None], messages: int) -> tuple[float, float] | None:
    with tempfile.TemporaryDirectory() as tmp:
        return fn(Path(tmp), messages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--peers", action="store_true", help="also measure persist-queue when importable")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"# broker queue path, {args.messages} messages, one at a time; load {load[0]:.2f}")
    _measure(run_nexus, min(500, args.messages))  # warm-up: imports, page cache
    nexus = _measure(run_nexus, args.messages)
    assert nexus is not None
    print(f"{'store':<34} {'msg/s':>10} {'p99 accept ms':>14} {'ratio':>8}")
    print(f"{'nexus BrokerStore':<34} {nexus[0]:>10,.0f} {nexus[1]:>14.3f} {'1.00':>8}")
    if not args.peers:
        print("(peers not requested: run with --peers to measure persist-queue in the same run)")
        return 0
    peer = _measure(run_persist_queue, args.messages)
    if peer is None:
        print("persist-queue is not installed (pip install persist-queue): no ratio printed")
        return 0
    ratio = nexus[0] / peer[0]
    print(f"{'persist-queue SQLiteAckQueue':<34} {peer[0]:>10,.0f} {peer[1]:>14.3f} {1 / ratio:>8.2f}")
    print(f"nexus is {ratio:.2f}x the messages/s of persist-queue in this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
