"""Broker restart and idle cost: reload 10,000 pending items over 1,000 agents; memory per idle agent.

Run:  .venv/bin/python bench/bench_broker_restart.py [--agents 1000] [--items 10000]

Targets (issue "The Agent Broker"): broker ready and draining in < 1 s after a restart with
10,000 pending items over 1,000 agents; < 50 KB per registered idle agent. "Ready and draining"
is measured up to the moment the first run has started. Memory is measured with tracemalloc
(Python allocations of the broker's live state) and as the process RSS difference.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import _machine

from nexus.broker import AgentBroker, AgentIdentity, BrokerSettings, QueueSettings
from nexus.engine import AgentResult, AgentSpec
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest, BrokerStore


class _HeldRun:
    """A run that never ends by itself (the benchmark only needs to see runs start)."""

    state = "streaming"

    def __init__(self) -> None:
        self.result: asyncio.Future[AgentResult] = asyncio.get_running_loop().create_future()

    def steer(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("no steering in this benchmark")

    def abort(self, reason: str) -> None:
        if not self.result.done():
            self.result.set_result(AgentResult(stop_reason="aborted"))


class _Runner:
    def __init__(self) -> None:
        self.first_start: float | None = None
        self.started = 0

    def start(self, spec: object, session: str, message: str, **kwargs: object) -> _HeldRun:
        if self.first_start is None:
            self.first_start = time.perf_counter()
        self.started += 1
        return _HeldRun()

    def model_problem(self, ref: str) -> None:
        return None


def _fill(path: Path, agents: int, items: int) -> None:
    with Ledger.open(path) as ledger:
        store = BrokerStore(ledger.database)
        for n in range(agents):
            run_inline(ledger.sessions.ensure(NewSession(f"agent:a{n}")))
            store.save_agent(f"a{n}", role="worker", session_label=f"agent:a{n}", spec={"model": "openai/gpt-4o-mini"})
        requests = [
            AcceptRequest(
                f"a{n % agents}", f"agent:a{n % agents}", f"m{n}", "user", {"content": f"job {n}"}, "followup"
            )
            for n in range(items)
        ]
        for start in range(0, items, 1000):
            store.accept_many(requests[start : start + 1000])


def _message(n: int, agents: int) -> dict[str, object]:
    return {"id": f"m{n}", "from": "user", "to": f"a{n % agents}", "content": f"job {n}"}


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _restart(path: Path, *, trace: bool) -> tuple[float, int, float, float]:
    """(seconds to the first run, runs started, bytes per agent (tracemalloc), KB per agent (RSS)).

    With ``trace`` the allocations are traced (which slows them): use the time of a run without.
    """
    with Ledger.open(path) as ledger:
        runner = _Runner()
        settings = BrokerSettings(queue=QueueSettings(mode="followup"), max_concurrent=8)
        gc.collect()
        rss_before = _rss_kb()
        if trace:
            tracemalloc.start()
        t0 = time.perf_counter()
        broker = AgentBroker(ledger, runner, settings)  # type: ignore[arg-type]
        await broker.start()
        while runner.first_start is None:  # noqa: ASYNC110 - polls the loop itself; an Event would add a wake-up
            await asyncio.sleep(0)
        ready = runner.first_start - t0
        current = tracemalloc.get_traced_memory()[0] if trace else 0
        tracemalloc.stop()
        rss_after = _rss_kb()
        agents = len(broker.list_agents())
        await broker.close()
        return ready, runner.started, current / agents, (rss_after - rss_before) / agents


async def _idle_agents(path: Path, agents: int) -> tuple[float, float]:
    """Bytes per registered idle agent (no pending items): tracemalloc and RSS."""
    with Ledger.open(path) as ledger:
        for n in range(agents):
            await ledger.sessions.ensure(NewSession(f"agent:idle{n}"))
        broker = AgentBroker(ledger, _Runner(), BrokerSettings())
        await broker.start()
        gc.collect()
        rss_before = _rss_kb()
        tracemalloc.start()
        for n in range(agents):
            spec = AgentSpec(model="openai/gpt-4o-mini")
            broker.register_agent(AgentIdentity(f"idle{n}", f"agent:idle{n}"), spec=spec)
        await asyncio.sleep(0)  # let every drain task start and park on its wake event
        current, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        per_rss = (_rss_kb() - rss_before) / agents
        await broker.close()
        return current / agents, per_rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--items", type=int, default=10_000)
    args = parser.parse_args()
    print(_machine.header("bench_broker_restart.py: restart and idle memory"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agents.db"
        _fill(path, args.agents, args.items)
        ready, started, _, per_agent_rss = asyncio.run(_restart(path, trace=False))
        _, _, per_agent, _ = asyncio.run(_restart(path, trace=True))
        idle_bytes, idle_rss = asyncio.run(_idle_agents(Path(tmp) / "idle.db", args.agents))
    print(f"# broker restart: {args.items:,} pending items over {args.agents:,} agents")
    print(f"{'measure':<46} {'value':>12} {'target':>10}")
    print(f"{'ready and draining (first run started)':<46} {ready * 1000:>10.0f} ms {'< 1000 ms':>10}")
    print(f"{'runs started at once (max_concurrent)':<46} {started:>12} {'':>10}")
    print(f"{'live state per agent with 10 items (tracemalloc)':<46} {per_agent / 1024:>9.1f} KB {'':>10}")
    print(f"{'live state per agent with 10 items (RSS)':<46} {per_agent_rss:>9.1f} KB {'':>10}")
    print(f"{'per registered idle agent (tracemalloc)':<46} {idle_bytes / 1024:>9.1f} KB {'< 50 KB':>10}")
    print(f"{'per registered idle agent (RSS)':<46} {idle_rss:>9.1f} KB {'< 50 KB':>10}")
    print(_machine.load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
