"""Broker end to end through the engine: 100 agents, a zero-latency scripted model, every turn in the ledger.

Run:  .venv/bin/python bench/bench_broker_e2e.py [--agents 100] [--messages 1000]

Targets (issue "The Agent Broker"): >= 500 turns/s on this 2-core machine and p99 send -> first
token < 20 ms. A "turn" is the whole path: durable accept, claim, session lock, context assembly
from the ledger, the agent loop, the crash journal, the final turn write (which marks the queue
item delivered). "First token" is the first text event the model stream yields for that message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _machine

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 100 else max(samples)


async def run(agents: int, messages: int, directory: Path, rate: float | None = None) -> tuple[float, float, float]:
    """(turns per second, p99 send->first token ms, median ms); ``rate`` paces the sends (msg/s)."""
    scripted = ScriptedModel([text("ok") for _ in range(messages)], record=False)
    sent_at: dict[str, float] = {}
    first_token: dict[str, float] = {}

    async def timed_stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        context = args[1]
        token = str(context.messages[-1].content).rsplit("#", 1)[-1]
        async for event in scripted.stream(*args, **kwargs):
            if event.type == "text_delta" and token not in first_token:
                first_token[token] = time.perf_counter()
            yield event

    with Ledger.open(directory / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=timed_stream, cooldowns=ProfileCooldowns())
        settings = BrokerSettings(queue=QueueSettings(mode="followup", cap=10_000), max_concurrent=16)
        broker = AgentBroker(ledger, env, settings)
        env.spawner = BrokerSpawner(broker)
        await broker.start()
        for n in range(agents):
            broker.register_agent(AgentIdentity(f"a{n}", f"agent:a{n}"), spec=AgentSpec(model=scripted.model.ref))
        start = time.perf_counter()
        for n in range(messages):
            if rate is not None:
                await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            sent_at[str(n)] = time.perf_counter()
            await broker.send(AgentMessage(f"m{n}", "user", f"a{n % agents}", f"task #{n}"))
        await broker.wait_until_idle()
        elapsed = time.perf_counter() - start
        await broker.close()
    delays = [(first_token[k] - sent_at[k]) * 1000 for k in sent_at if k in first_token]
    assert len(delays) == messages, f"{messages - len(delays)} messages produced no token"
    return messages / elapsed, _p99(delays), statistics.median(delays)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="messages/s for the latency run")
    args = parser.parse_args()
    print(_machine.header("bench_broker_e2e.py: broker through the engine"))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("NEXUS_HOME", tmp)
        for name in ("warm", "burst", "paced"):
            (Path(tmp) / name).mkdir()
        asyncio.run(run(10, 50, Path(tmp) / "warm"))
        turns_per_s, burst_p99, _ = asyncio.run(run(args.agents, args.messages, Path(tmp) / "burst"))
        _, p99, median = asyncio.run(run(args.agents, args.messages // 2, Path(tmp) / "paced", rate=args.rate))
    print(f"# broker end to end: {args.messages} messages over {args.agents} agents, scripted model; load {load:.2f}")
    print(f"{'measure':<48} {'value':>10} {'target':>10}")
    print(f"{'turns per second (all sent at once)':<48} {turns_per_s:>10.0f} {'>= 500':>10}")
    print(f"{'send -> first token p99, all at once (ms)':<48} {burst_p99:>10.1f} {'(backlog)':>10}")
    print(f"{f'send -> first token p99 at {args.rate:.0f} msg/s (ms)':<48} {p99:>10.1f} {'< 20':>10}")
    print(f"{f'send -> first token median at {args.rate:.0f} msg/s (ms)':<48} {median:>10.1f} {'':>10}")
    print(_machine.load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
