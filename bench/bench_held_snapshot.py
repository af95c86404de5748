"""The queue path on PostgreSQL while another session holds a snapshot (idle in transaction) for 60 s.

Run:  .venv/bin/python bench/bench_held_snapshot.py [--hold-s 60] [--window 1000] [--postgres URL]

A held snapshot keeps every row version newer than it alive: vacuum can clean none of the queue's dead
rows (each message leaves two: its claim and its settle update the row), so tables and indexes grow
while it is held. Measured: the queue path of ``bench_ledger_backends.py`` (accept -> claim -> settle,
32 senders) in windows of ``--window`` messages, with a broker's poll of new items (``queued_after``)
every 250 ms beside it, before the hold (``--before-s``), during it, and after it ends; per phase the
median and lowest window msg/s, and the queue table's dead rows and size at its end. Issue 22's
requirement: a held snapshot must not collapse throughput. Without ``--postgres`` a throwaway cluster
is started with scripts/postgres.sh (and stopped after).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import _machine
from bench_ledger_backends import postgres_or_throwaway, queue_path

from nexus.ledger import Ledger

_TABLE = (
    "SELECT n_dead_tup, pg_total_relation_size('queue_items'), autovacuum_count FROM pg_stat_user_tables"
    " WHERE relname = 'queue_items'"
)


async def _poll(ledger: Ledger, stop: asyncio.Event) -> None:
    """What a broker does beside the queue path: look for new items every 250 ms."""
    cursor = await ledger.queue.cursor()
    while not stop.is_set():
        _, cursor = await ledger.queue.queued_after(cursor)
        await asyncio.sleep(0.25)


async def _phase(ledger: Ledger, seconds: float, window: int) -> list[float]:
    """Queue-path windows for ``seconds``: each window's msg/s."""
    rates: list[float] = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends or not rates:
        rate, _, _ = await queue_path(ledger, window, 32)
        rates.append(rate)
    return rates


def _table(url: str) -> tuple[int, int, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(_TABLE).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


async def measure(url: str, args: argparse.Namespace) -> list[tuple[str, list[float], tuple[int, int, int]]]:
    import psycopg

    phases: list[tuple[str, list[float], tuple[int, int, int]]] = []
    async with await Ledger.connect(url) as ledger:
        stop = asyncio.Event()
        poller = asyncio.create_task(_poll(ledger, stop))
        phases.append(("before", await _phase(ledger, args.before_s, args.window), _table(url)))
        holder = psycopg.connect(url)  # idle in transaction, its snapshot taken by the first read
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM queue_items").fetchone()
        try:
            phases.append((f"snapshot held {args.hold_s:.0f} s", await _phase(ledger, args.hold_s, args.window),
                           _table(url)))  # fmt: skip
        finally:
            holder.rollback()
            holder.close()
        phases.append(("after", await _phase(ledger, args.after_s, args.window), _table(url)))
        stop.set()
        await poller
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hold-s", type=float, default=60)
    parser.add_argument("--before-s", type=float, default=20)
    parser.add_argument("--after-s", type=float, default=30)
    parser.add_argument("--window", type=int, default=1000, help="messages per measured window")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL database to measure (a ledger or empty)")
    args = parser.parse_args()
    print(_machine.header("bench_held_snapshot.py: the PostgreSQL queue path while a snapshot is held"))
    with postgres_or_throwaway(args.postgres) as url:
        if url is None:
            print("postgresql: not measured (no server could be had)")
            return
        phases = asyncio.run(measure(url, args))
    print(f"{'phase':<22} {'windows':>8} {'median msg/s':>13} {'lowest msg/s':>13} {'dead rows':>10} {'table MB':>9}")
    for name, rates, (dead, size, _) in phases:
        print(f"{name:<22} {len(rates):>8} {statistics.median(rates):>13,.0f} {min(rates):>13,.0f} {dead:>10,}"
              f" {size / 1e6:>9.1f}")  # fmt: skip
    print(f"windows of {args.window} messages (32 senders), a poll of new items every 250 ms beside them")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
