"""End-to-end turns/s with 1 and 3 broker processes on one database, PostgreSQL beside SQLite, in one run.

Run:  .venv/bin/python bench/bench_scale_out.py [--agents 100] [--per-agent 20] [--rounds 2] [--postgres URL]

Each broker process is the fault tests' (``nexus.testing.faults.BrokerProcess``: an ``AgentBroker`` under
session leases, each run scripted to take ``--run-s`` (50 ms, the model's latency) and then write its turn
consuming its message). The processes start on an empty queue; then ``--agents`` x ``--per-agent``
followups are accepted, and the clock runs from the first accept until no message is waiting or running:
turns/s. Each measurement gets a fresh database (an SQLite file; a new PostgreSQL database). Target
(issue 22): 3 processes >= 1.5x one on PostgreSQL. Without ``--postgres`` a throwaway cluster is started
with scripts/postgres.sh (and stopped after).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import _machine
from bench_ledger_backends import postgres_or_throwaway

from nexus.ledger import Ledger
from nexus.testing.faults import BrokerProcess, all_finished, register, requests


def fresh_target(backend: str, url: str | None, folder: Path) -> str:
    """A new, empty ledger database: an SQLite file in ``folder``, or a new database on the server at ``url``."""
    name = f"scale_{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        return str(folder / f"{name}.db")
    import psycopg

    assert url is not None
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))


async def _prepare(target: str, agents: int) -> None:
    async with await Ledger.connect(target) as ledger:
        await register(ledger, agents)


async def _send(target: str, agents: int, per_agent: int) -> None:
    async with await Ledger.connect(target) as ledger:
        await asyncio.gather(*(ledger.queue.accept(request) for request in requests(agents, per_agent)))


def cpu_s(pid: int | str, children: bool = False) -> float:
    """CPU seconds a process used so far (with ``children``: of its ended children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11  # cutime, cstime; utime, stime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def transactions(target: str) -> int | None:
    """PostgreSQL: transactions the database has seen so far (committed and rolled back; a backend's counts
    arrive when it ends or pauses); ``None`` for SQLite."""
    if not target.startswith("postgresql"):
        return None
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return None if row is None else int(row[0])


def server_cpu_s(target: str) -> float | None:
    """CPU seconds of a local PostgreSQL server's ended backends so far (its postmaster's children's time, from
    /proc: a backend's time is added when it exits); ``None`` for SQLite or a server elsewhere."""
    if not target.startswith("postgresql"):
        return None
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        assert backend is not None
        postmaster = Path(f"/proc/{backend[0]}/stat").read_text().rsplit(")", 1)[1].split()[1]
        return cpu_s(postmaster, children=True)
    except (OSError, IndexError):
        return None


@dataclass(slots=True)
class Run:
    """One measurement: turns/s, writes refused and run again, CPU ms per turn of the brokers and the server."""

    rate: float
    refused: int
    broker_cpu_ms: float
    server_cpu_ms: float | None
    transactions_per_turn: float | None


def _conflicts(out: Path) -> int:
    """The ``conflicts N`` line a broker prints as it stops (0 if it printed none)."""
    lines = [line.split()[1] for line in out.read_text().splitlines() if line.startswith("conflicts ")]
    return int(lines[-1]) if lines else 0


def turns_per_second(target: str, processes: int, args: argparse.Namespace, logs: Path) -> Run:
    """Start ``processes`` brokers, accept every message, and time until all are finished; turns/s, and the
    writes the database refused for a conflict and the brokers ran again (PostgreSQL's serialization
    failures and deadlocks: ``PgDatabase.conflicts``, which each broker prints as it stops)."""
    asyncio.run(_prepare(target, args.agents))
    brokers = [BrokerProcess(target, args.ttl_ms, args.run_s, logs=logs) for _ in range(processes)]
    try:
        server_before, brokers_before = server_cpu_s(target), sum(cpu_s(broker.pid) for broker in brokers)
        xacts_before = transactions(target)
        began = time.perf_counter()
        asyncio.run(_send(target, args.agents, args.per_agent))
        all_finished(target, timeout_s=600)
        elapsed = time.perf_counter() - began
        cpu = sum(cpu_s(broker.pid) for broker in brokers) - brokers_before  # their start left out
    finally:
        for broker in brokers:
            broker.stop()
    turns = args.agents * args.per_agent
    time.sleep(0.5)  # the backends of the brokers' connections end
    server_after = server_cpu_s(target)
    server = None if server_before is None or server_after is None else server_after - server_before
    xacts_after = transactions(target)
    xacts = None if xacts_before is None or xacts_after is None else (xacts_after - xacts_before) / turns
    refused = sum(_conflicts(broker.out_path) for broker in brokers)
    return Run(turns / elapsed, refused, cpu * 1000 / turns,
               None if server is None else server * 1000 / turns, xacts)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--per-agent", type=int, default=20)
    parser.add_argument("--run-s", type=float, default=0.05, help="the scripted model's latency per run")
    parser.add_argument("--ttl-ms", type=int, default=15000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server whose user may create databases")
    args = parser.parse_args()
    print(_machine.header("bench_scale_out.py: end-to-end turns/s, 1 and 3 broker processes on one database"))
    folder = Path(tempfile.mkdtemp(prefix="nexus-bench-scale-"))
    results: dict[tuple[str, int], list[float]] = {}
    runs: dict[tuple[str, int], list[Run]] = {}
    with postgres_or_throwaway(args.postgres) as url:
        for _ in range(args.rounds):  # interleaved: a busy neighbour hits every row alike
            for backend in ("sqlite", "postgresql") if url is not None else ("sqlite",):
                for processes in (1, 3):
                    target = fresh_target(backend, url, folder)
                    run = turns_per_second(target, processes, args, folder / "logs")
                    results.setdefault((backend, processes), []).append(run.rate)
                    runs.setdefault((backend, processes), []).append(run)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"{'backend':<12} {'processes':>9} {'turns/s (median)':>17} {'runs':>20} {'vs 1 process':>13}")
    for (backend, processes), rates in results.items():
        ratio = statistics.median(rates) / statistics.median(results[(backend, 1)])
        shown = ", ".join(f"{r:.0f}" for r in rates)
        print(f"{backend:<12} {processes:>9} {statistics.median(rates):>17,.0f} {shown:>20} {ratio:>12.2f}x")
    turns = args.agents * args.per_agent
    print("each run: CPU ms per turn (brokers; PostgreSQL's backends), writes refused for a conflict and run")
    print("again per 500 turns, PostgreSQL transactions per turn:")
    for (backend, processes), measured in runs.items():
        cpu = ", ".join(
            f"{run.broker_cpu_ms:.1f}" + ("" if run.server_cpu_ms is None else f"; {run.server_cpu_ms:.1f}")
            for run in measured
        )
        refused = ", ".join(f"{run.refused * 500 / turns:.0f}" for run in measured)
        xacts = ", ".join(f"{run.transactions_per_turn:.1f}" for run in measured if run.transactions_per_turn)
        print(f"  {backend:<12} {processes} process(es): CPU {cpu}; refused {refused}"
              + (f"; transactions per turn {xacts}" if xacts else ""))  # fmt: skip
    if url is None:
        print("postgresql: not measured (no server could be had)")
    print(f"{args.agents} agents x {args.per_agent} followups, scripted runs of {args.run_s * 1000:.0f} ms, "
          f"{args.rounds} interleaved rounds")  # fmt: skip
    print(_machine.load_line())


if __name__ == "__main__":
    main()
