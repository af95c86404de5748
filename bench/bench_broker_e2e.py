"""Broker end to end through the engine: 100 agents, a zero-latency scripted model, every turn in the ledger.

Run:  .venv/bin/python bench/bench_broker_e2e.py [--agents 100] [--messages 1000] [--gc tuned|default]
      [--also-src LABEL=DIR]

Targets (issue "The Agent Broker", with issue 25's margin of 1.3x): >= 650 turns/s and p99 send ->
first token < 20 ms. A "turn" is the whole path: durable accept, claim, session lock, context assembly
from the ledger, the agent loop, the crash journal, the final turn write (which marks the queue item
delivered). "First token" is the first text event the model stream yields for that message.

Each measurement runs in a fresh process, in rounds; beside the turns it prints their CPU time per
turn (``time.process_time``), which moves far less with a busy machine than turns/s, and the
stdlib-sqlite3 floor of the queue path measured in the same rounds (``_sqlite_floor``: accept, claim
and deliver as three transactions, one message per step and in batches of 32), so a reader on another
machine can scale the numbers. ``--also-src`` runs the broker from another source tree too (an older
commit's ``src/``) in the same rounds, with before/after ratios of CPU per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import _machine
import _sqlite_floor as floor_mod

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 100 else max(samples)


async def run(agents: int, messages: int, directory: Path, rate: float | None = None) -> dict[str, float]:
    """``rate`` (turns/s), ``p99`` and ``median`` (send -> first token ms), ``cpu_us`` (per turn);
    ``rate`` paces the sends (msg/s)."""
    scripted = ScriptedModel([text("ok") for _ in range(messages)], record=False)
    sent_at: dict[str, float] = {}
    first_token: dict[str, float] = {}

    async def timed_stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        context = args[1]
        token = str(context.messages[-1].content).rsplit("#", 1)[-1]
        async with aclosing(scripted.stream(*args, **kwargs)) as events:  # closed when the run stops at `done`
            async for event in events:
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
        cpu0, start = time.process_time(), time.perf_counter()
        for n in range(messages):
            if rate is not None:
                await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
            sent_at[str(n)] = time.perf_counter()
            await broker.send(AgentMessage(f"m{n}", "user", f"a{n % agents}", f"task #{n}"))
        await broker.wait_until_idle()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
        await broker.close()
    delays = [(first_token[k] - sent_at[k]) * 1000 for k in sent_at if k in first_token]
    assert len(delays) == messages, f"{messages - len(delays)} messages produced no token"
    return {"rate": messages / elapsed, "p99": _p99(delays), "median": statistics.median(delays),
            "cpu_us": cpu / messages * 1e6}  # fmt: skip


SRC = str(Path(__file__).resolve().parents[1] / "src")
SCRIPT = str(Path(__file__).resolve())
FLOOR_SCRIPT = str(Path(__file__).resolve().with_name("_sqlite_floor.py"))
TARGET_TURNS = 650.0


def _child(agents: int, messages: int, rate: float, gc_mode: str) -> dict[str, float]:
    """A warm-up, all messages at once (turns/s, CPU per turn), then half of them paced (first-token delay)."""
    if gc_mode == "tuned":
        tune_gc_for_many_runs()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("NEXUS_HOME", tmp)
        for name in ("warm", "burst", "paced"):
            (Path(tmp) / name).mkdir()
        asyncio.run(run(10, 50, Path(tmp) / "warm"))
        burst = asyncio.run(run(agents, messages, Path(tmp) / "burst"))
        paced = asyncio.run(run(agents, messages // 2, Path(tmp) / "paced", rate=rate))
    return {"rate": burst["rate"], "cpu_us": burst["cpu_us"], "burst_p99": burst["p99"], "p99": paced["p99"],
            "median": paced["median"]}  # fmt: skip


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="messages/s for the latency run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--gc",
        choices=("tuned", "default"),
        default="tuned",
        help="tuned: the collector set up as `nexus serve` sets it (tune_gc_for_many_runs); default: Python's",
    )
    parser.add_argument("--floor-messages", type=int, default=20_000, help="messages of each floor row")
    parser.add_argument(
        "--also-src", action="append", default=[], metavar="LABEL=DIR", help="also run the broker from this tree"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.agents, args.messages, args.rate, args.gc)))
        return 0
    print(_machine.header("bench_broker_e2e.py: broker through the engine"))
    trees = [("", SRC), *(tuple(item.split("=", 1)) for item in args.also_src)]
    results: dict[str, list[dict[str, float]]] = {}
    own = ["--agents", str(args.agents), "--messages", str(args.messages), "--rate", str(args.rate), "--gc", args.gc]
    for _ in range(args.rounds):
        for batch in (1, floor_mod.BATCH):
            name = "one per step" if batch == 1 else f"batches of {batch}"
            measured = floor_mod.child(FLOOR_SCRIPT, None, ["floor", str(args.floor_messages), str(batch)])
            results.setdefault(name, []).append(measured)
        for label, src in trees:
            results.setdefault(label, []).append(floor_mod.child(SCRIPT, src, own))
    floors = {name: {k: _median(results[name], k) for k in ("rate", "cpu_us")} for name in
              ("one per step", f"batches of {floor_mod.BATCH}")}  # fmt: skip
    print(f"# broker end to end: {args.messages} messages over {args.agents} agents, scripted model; median of")
    print(f"# {args.rounds} rounds, each in a fresh process; the floor: accept + claim + deliver, msg/s and CPU us/msg")
    print(f"# gc: {args.gc}")
    for name, found in floors.items():
        print(f"{'floor: stdlib sqlite3, ' + name:<48} {found['rate']:>10,.0f} msg/s {found['cpu_us']:>8.1f} us CPU")
    for label, _ in trees:
        tree = f" [{label}]" if label else ""
        rate, cpu = _median(results[label], "rate"), _median(results[label], "cpu_us")
        print(f"\n{'measure' + tree:<48} {'value':>10} {'target':>10}")
        print(f"{'turns per second (all sent at once)':<48} {rate:>10.0f} {f'>= {TARGET_TURNS:.0f}':>10}")
        print(f"{'CPU per turn (us); 1e6 / CPU = turns/s a core':<48} {cpu:>10.0f} {1e6 / cpu:>10.0f}")
        ratio = "  ".join(
            f"{rate / found['rate']:.3f}x ({found['cpu_us'] / cpu:.3f}x CPU)" for found in floors.values()
        )
        print(f"{'turns/s over the floors (one per step, 32)':<48} {ratio}")
        print(f"{'send -> first token p99, all at once (ms)':<48} {_median(results[label], 'burst_p99'):>10.1f} "
              f"{'(backlog)':>10}")  # fmt: skip
        print(f"{f'send -> first token p99 at {args.rate:.0f} msg/s (ms)':<48} {_median(results[label], 'p99'):>10.1f} "
              f"{'< 20':>10}")  # fmt: skip
        print(f"{f'send -> first token median at {args.rate:.0f} msg/s (ms)':<48} "
              f"{_median(results[label], 'median'):>10.1f}")  # fmt: skip
    for label, _ in trees[1:]:
        before, after = _median(results[label], "cpu_us"), _median(results[""], "cpu_us")
        print(f"\nCPU per turn, {label} / this tree (same rounds): {before:.0f} / {after:.0f} = {before / after:.2f}x")
    print(_machine.load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
