"""The ledger's queue path on each backend, in one run: SQLite and PostgreSQL behind the same QueueStore.

Run:  .venv/bin/python bench/bench_ledger_backends.py [--messages 4000] [--senders 32] [--postgres URL]

Each message is accepted durably (``ledger.queue.accept``), claimed and settled ``delivered``: the three
writes of the broker's queue path, through the async protocol, with ``--senders`` tasks sending at once
(accepts and claims of one event-loop iteration share a transaction on either backend). Printed: messages
per second through all three steps, and the p50/p99 latency of an accept (from the call to its commit).
Without ``--postgres`` a throwaway cluster is started with scripts/postgres.sh (and stopped after); the
PostgreSQL rows are left out, saying so, where none can be had.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import _machine

from nexus.ledger import AcceptRequest, Ledger, NewSession

ROOT = Path(__file__).resolve().parents[1]


async def queue_path(ledger: Ledger, messages: int, senders: int) -> tuple[float, float, float]:
    """(messages/s, p50 accept ms, p99 accept ms) of accept -> claim -> deliver over ``senders`` tasks."""
    await ledger.sessions.ensure(NewSession("agent:worker"))
    turn = "none"
    latencies: list[float] = []
    per = messages // senders
    run = uuid.uuid4().hex[:8]

    async def sender(index: int) -> None:
        for n in range(per):
            message = {"content": f"message {index}-{n}", "from": "user"}
            request = AcceptRequest("worker", "agent:worker", f"{run}-{index}-{n}", "user", message, "followup")
            began = time.perf_counter()
            item, _ = await ledger.queue.accept(request)
            latencies.append((time.perf_counter() - began) * 1000)
            await ledger.queue.claim([item.id])
            # a final state a claimed row may take (only a waiting row is dropped); the same write a drop was
            await ledger.queue.settle([item.id], "failed", reason=turn)

    began = time.perf_counter()
    await asyncio.gather(*(sender(i) for i in range(senders)))
    elapsed = time.perf_counter() - began
    cuts = statistics.quantiles(latencies, n=100)
    return per * senders / elapsed, cuts[49], cuts[98]


def start_postgres(folder: str) -> str | None:
    """A throwaway cluster's URL, or None (said on stderr) where it cannot start."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres.sh"), "start", folder], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(f"no PostgreSQL: {done.stderr.strip()}", file=sys.stderr)
        return None
    return done.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def postgres_or_throwaway(given: str | None) -> Iterator[str | None]:
    """``given`` (a URL), or a throwaway cluster's (scripts/postgres.sh, stopped and removed after; ``None``,
    said on stderr, where none can start)."""
    if given is not None:
        yield given
        return
    folder = tempfile.mkdtemp(prefix="nexus-bench-pg-")  # its own: postgres.sh hands it to the postgres user
    try:
        yield start_postgres(folder)
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "stop", folder], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


async def measure(target: str | Path, messages: int, senders: int) -> tuple[float, float, float]:
    ledger = await Ledger.connect(target)
    try:
        return await queue_path(ledger, messages, senders)
    finally:
        await ledger.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--senders", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres", metavar="URL", help="an empty-or-ledger PostgreSQL database to measure")
    args = parser.parse_args()
    print(_machine.header("ledger backends: the queue path (accept -> claim -> settle) through QueueStore"))
    folder = None if args.postgres else tempfile.mkdtemp(prefix="nexus-bench-pg-")
    url = args.postgres or start_postgres(str(folder))
    rows: list[tuple[str, float, float, float]] = []
    try:
        for _ in range(args.rounds):  # interleaved: each round measures both backends
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(("sqlite", *asyncio.run(measure(Path(tmp) / "agents.db", args.messages, args.senders))))
            if url is not None:
                rows.append(("postgresql", *asyncio.run(measure(url, args.messages, args.senders))))
    finally:
        if folder is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "stop", folder], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{'backend':<12} {'msg/s':>9} {'p50 accept ms':>14} {'p99 accept ms':>14}")
    for name, rate, p50, p99 in rows:
        print(f"{name:<12} {rate:>9,.0f} {p50:>14.2f} {p99:>14.2f}")
    if url is None:
        print("postgresql: not measured (no server could be had); no ratio printed")
    print(f"{args.messages} messages, {args.senders} senders at once, {args.rounds} rounds")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
