"""Broker queue path alone: durable accept -> claim -> mark delivered, the engine replaced by a no-op.

Run:  .venv/bin/python bench/bench_broker_queue.py [--messages 5000] [--paced-messages 50000] [--peers]

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
import asyncio
import contextlib
import dataclasses
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import _machine

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, new_message_id
from nexus.engine import AgentResult
from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs
from nexus.ledger import Ledger, NewSession
from nexus.ledger._checkpoint import background_checkpoints
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore, deliver_in


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 100 else max(samples)


def run_nexus(directory: Path, messages: int) -> tuple[float, float]:
    """(messages per second, p99 accept ms) for accept -> claim -> deliver, one message at a time."""
    with Ledger.open(directory / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:worker")))
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


class _TurnWrites:
    """The turn writes of the no-op runs: those ending in the same loop iteration share a transaction."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._pending: list[tuple[tuple[str, ...], str, asyncio.Future[None]]] = []

    def deliver(self, item_ids: tuple[str, ...], turn_id: str) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append((item_ids, turn_id, future))
        return future

    def _flush(self) -> None:
        group, self._pending = self._pending, []
        self._database.write(lambda conn: [deliver_in(conn, ids, turn_id) for ids, turn_id, _ in group])
        for _, _, future in group:
            future.set_result(None)


class _NoOpRun:
    """A turn that ends at once, marking its items delivered (the engine does it in its turn's write;
    turns that end in the same loop iteration share a transaction, as concurrent turn writes would)."""

    state = "finishing"

    def __init__(self, writes: _TurnWrites, item_ids: tuple[str, ...]) -> None:
        self._writes, self._item_ids = writes, item_ids

    def steer(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("no steering in this benchmark")

    def abort(self, reason: str) -> None:
        return None

    @property
    def result(self) -> Coroutine[Any, Any, AgentResult]:
        return self._result()

    async def _result(self) -> AgentResult:
        turn_id = new_message_id()
        await self._writes.deliver(self._item_ids, turn_id)
        return AgentResult(turn_id=turn_id)


def run_broker(
    directory: Path,
    messages: int,
    agents: int = 100,
    *,
    served: bool = True,
    max_concurrent: int | None = None,
    paced_rate: float | None = None,
    from_due: bool = False,
) -> tuple[float, float]:
    """(messages per second, p99 send latency ms) through ``AgentBroker`` with concurrent senders.

    ``served``: WAL checkpoints on their own thread, as ``nexus serve`` and the drains run the
    broker (``nexus.ledger._checkpoint``); otherwise every checkpoint runs in a commit on the loop.
    ``max_concurrent``: the global cap on runs at once (default: the broker's, 8).
    ``paced_rate``: send at this many messages a second (open loop: each send is due at its
    time whether or not earlier ones returned, and its latency counts from when it was due);
    otherwise in waves of ``agents`` messages, each wave sent at once. The latency is the
    sender's: from its call of ``send`` until ``send`` returned; ``from_due`` counts it from when
    the message was due instead (adds the pacing loop's own lateness, up to the loop's 1 ms
    timer resolution).
    """

    async def main() -> tuple[float, float]:
        with Ledger.open(directory / "agents.db") as ledger, contextlib.ExitStack() as stack:
            if served:
                stack.enter_context(background_checkpoints(ledger.database))
            turn_writes = _TurnWrites(ledger.database)

            class Runner:
                def start(self, spec: object, session: str, message: str, **kwargs: Any) -> _NoOpRun:
                    return _NoOpRun(turn_writes, tuple(kwargs["consumes"]))

                async def begin(self, spec: object, session: str, message: str, **kwargs: Any) -> _NoOpRun:
                    return self.start(spec, session, message, **kwargs)  # what the broker calls since it awaits

                def model_problem(self, ref: str) -> None:
                    return None

            settings = BrokerSettings(queue=QueueSettings(mode="followup", cap=10_000))
            if max_concurrent is not None:
                settings = dataclasses.replace(settings, max_concurrent=max_concurrent)
            broker = AgentBroker(ledger, Runner(), settings)  # type: ignore[arg-type]
            await broker.start()
            for n in range(agents):
                await ledger.sessions.ensure(NewSession(f"agent:a{n}"))
                broker.register_agent(AgentIdentity(f"a{n}", f"agent:a{n}"))
            latencies: list[float] = []

            async def send(n: int, due: float | None = None) -> None:
                t0 = time.perf_counter() if due is None or not from_due else due
                await broker.send(AgentMessage(id=f"m{n}", from_="user", to=f"a{n % agents}", content=f"task {n}"))
                latencies.append((time.perf_counter() - t0) * 1000)

            start = time.perf_counter()
            if paced_rate is None:
                for wave in range(0, messages, agents):
                    await asyncio.gather(*(send(n) for n in range(wave, min(wave + agents, messages))))
            else:
                await _paced(send, messages, paced_rate, start)
            for n in range(agents):
                await broker.wait_for_idle(f"a{n}")
            elapsed = time.perf_counter() - start
            await broker.close()
            return messages / elapsed, _p99(latencies)

    return asyncio.run(main())


async def _paced(
    send: Callable[[int, float], Coroutine[Any, Any, None]], messages: int, rate: float, start: float
) -> None:
    """Start ``send(n, due)`` for message ``n`` at ``start + n / rate`` (checking every 0.5 ms: asyncio's
    timers resolve to 1 ms, so a send may start up to ~1 ms after it was due).

    Only the sends still running are held: keeping every task to the end left ~4 objects per message
    for the collector to walk, which slowed long runs (100,000 messages) by itself."""
    running: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(cast(BaseException, task.exception()))

    sent = 0
    while sent < messages and not failures:
        due_now = min(messages, int((time.perf_counter() - start) * rate) + 1)
        while sent < due_now:
            task = asyncio.ensure_future(send(sent, start + sent / rate))
            running.add(task)
            task.add_done_callback(finished)
            sent += 1
        await asyncio.sleep(0.0005)
    if running:
        await asyncio.wait(running)
    if failures:
        raise failures[0]


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


def _variants(paced_rate: float) -> dict[str, dict[str, Any]]:
    """The broker rows: how it is run (checkpoints, run cap) and how messages arrive (burst, paced)."""
    paced = f"paced {paced_rate:,.0f}/s"
    return {
        "burst, checkpoints on loop": {"served": False},
        "burst, checkpoint thread": {"served": True},
        "burst, checkpoint thread, cap 100": {"served": True, "max_concurrent": 100},
        f"{paced}, checkpoint thread": {"served": True, "paced_rate": paced_rate},
        f"{paced}, checkpoint thread, cap 100": {"served": True, "paced_rate": paced_rate, "max_concurrent": 100},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--peers", action="store_true", help="also measure persist-queue when importable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paced-rate", type=float, default=10_000, help="offered msg/s of the paced rows")
    parser.add_argument(
        "--paced-messages",
        type=int,
        default=50_000,
        help="messages of each paced row (50,000 at 10,000/s: 5 s sustained, many WAL cycles)",
    )
    parser.add_argument(
        "--gc",
        choices=("tuned", "default"),
        default="tuned",
        help="tuned: the collector settings nexus serve runs with (every row, the peer's too); default: CPython's",
    )
    args = parser.parse_args()
    print(_machine.header("bench_broker_queue.py: durable accept -> claim -> delivered"))
    if args.gc == "tuned":
        tune_gc_for_many_runs()
    print(f"# gc: {args.gc} (thresholds {gc.get_threshold()})")
    load = os.getloadavg()
    print(f"# broker queue path, {args.messages} messages, one at a time; load {load[0]:.2f}")
    _measure(run_nexus, min(500, args.messages))  # warm-up: imports, page cache
    nexus = _measure(run_nexus, args.messages)
    assert nexus is not None
    print(f"{'store':<52} {'msg/s':>10} {'p99 accept ms':>14} {'ratio':>8}")
    print(f"{'nexus BrokerStore (one at a time)':<52} {nexus[0]:>10,.0f} {nexus[1]:>14.3f} {'1.00':>8}")
    variants = _variants(args.paced_rate)
    rounds: dict[str, list[tuple[float, float]]] = {label: [] for label in variants}
    for _ in range(args.rounds):  # interleaved, so a busy neighbour hits every variant alike
        for label, options in variants.items():
            count = args.paced_messages if "paced_rate" in options else args.messages
            measured = _measure(lambda d, n, options=options: run_broker(d, n, **options), count)
            assert measured is not None
            rounds[label].append(measured)
    for label in variants:
        rate = statistics.median(r for r, _ in rounds[label])
        p99 = statistics.median(p for _, p in rounds[label])
        print(f"{'nexus AgentBroker, 100 agents, ' + label:<52} {rate:>10,.0f} {p99:>14.3f} {rate / nexus[0]:>8.2f}")
    print(f"(AgentBroker: median of {args.rounds} interleaved rounds. 'burst': each wave of 100 sent at once, so its")
    print(" p99 is a wave queueing behind itself; 'paced': one message every 1/rate s, open loop, latency from")
    print(f" the sender's call of send to its return, {args.paced_messages:,} messages, msg/s until the last one")
    print(" was delivered. 'checkpoint thread' is how nexus serve and the drains run it; 'cap' is")
    print(" max_concurrent, the runs allowed at once (default 8))")
    if not args.peers:
        print("(peers not requested: run with --peers to measure persist-queue in the same run)")
        print(_machine.load_line())
        return 0
    peer = _measure(run_persist_queue, args.messages)
    if peer is None:
        print("persist-queue is not installed (pip install persist-queue): no ratio printed")
        print(_machine.load_line())
        return 0
    ratio = nexus[0] / peer[0]
    print(f"{'persist-queue SQLiteAckQueue':<52} {peer[0]:>10,.0f} {peer[1]:>14.3f} {1 / ratio:>8.2f}")
    print(f"one at a time, nexus is {ratio:.2f}x the messages/s of persist-queue in this run")
    print(_machine.load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
