"""Broker queue path alone: durable accept -> claim -> mark delivered, the engine replaced by a no-op.

Run:  .venv/bin/python bench/bench_broker_queue.py [--messages 5000] [--paced-messages 50000] [--peers]
          [--also-src LABEL=DIR] [--loop uvloop]

Targets (issue "The Agent Broker", with issue 25's margin): >= 13,000 messages/s sustained with p99
accept latency < 2 ms (1.3x the broker issue's 10,000), and against the stdlib-sqlite3 floor measured in
the same run (``_sqlite_floor``): >= 0.9x the floor that commits one message per step, >= 0.25x the
floor that commits batches of 32. Each row also gives its CPU time per message (``time.process_time``
of its process, checkpoint thread included), which moves far less with a busy machine than msg/s, and
the floors' ratios by CPU time. ``--also-src`` runs the nexus rows from another source tree too (an
older commit's ``src/``), in the same rounds, and prints before/after ratios of CPU per message.

Ahead of persist-queue's ``SQLiteAckQueue`` (put -> get -> ack) measured in the same run: with
``--peers`` it runs in ``--peer-python`` (default: the venv ``/tmp/peerbench/venv-queue`` when it
exists, else this interpreter); where it is not importable the script says so and prints no ratio.

Both sides make every message durable before acknowledging it (one committed transaction per
accept) and keep the same three steps per message; nexus stores more per row (agent, sender,
message id for idempotence, attempts) and also writes the agent-to-agent log for half of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import _machine
import _sqlite_floor as floor_mod

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, new_message_id
from nexus.engine import AgentResult
from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs
from nexus.ledger import Ledger, NewSession
from nexus.ledger._checkpoint import background_checkpoints
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore, deliver_in


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 100 else max(samples)


def run_nexus(directory: Path, messages: int) -> dict[str, float]:
    """``rate`` (msg/s), ``p99`` (accept ms), ``cpu_us`` (per message): accept -> claim -> deliver, one at a time."""
    with Ledger.open(directory / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:worker")))
        store = BrokerStore(ledger.database)
        accept_ms: list[float] = []
        cpu0, start = time.process_time(), time.perf_counter()
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
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return {"rate": messages / elapsed, "p99": _p99(accept_ms), "cpu_us": cpu / messages * 1e6}


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


class _GroupedTurnWrites:
    """The turn writes of the no-op runs, each joining the queue's group commit (``SqlQueueStore.grouped``), as the
    engine's broker turn writes do on SQLite: one transaction with the accepts and claims of the same round."""

    def __init__(self, ledger: Ledger) -> None:
        self._queue = ledger.queue

    def deliver(self, item_ids: tuple[str, ...], turn_id: str) -> Awaitable[None]:
        return self._queue.grouped(lambda conn: deliver_in(conn, item_ids, turn_id))


class _NoOpRun:
    """A turn that ends at once, marking its items delivered (the engine does it in its turn's write;
    turns that end in the same loop iteration share a transaction, as concurrent turn writes would)."""

    state = "finishing"

    def __init__(self, writes: _TurnWrites | _GroupedTurnWrites, item_ids: tuple[str, ...]) -> None:
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


class _Runner:
    """The broker's runtime: every run is a :class:`_NoOpRun` of the items it consumes."""

    def __init__(self, turn_writes: _TurnWrites | _GroupedTurnWrites) -> None:
        self._turn_writes = turn_writes

    def start(self, spec: object, session: str, message: str, **kwargs: Any) -> _NoOpRun:
        return _NoOpRun(self._turn_writes, tuple(kwargs["consumes"]))

    async def begin(self, spec: object, session: str, message: str, **kwargs: Any) -> _NoOpRun:
        return self.start(spec, session, message, **kwargs)  # what the broker calls since it awaits

    def model_problem(self, ref: str) -> None:
        return None


async def _started_broker(
    ledger: Ledger, agents: int, max_concurrent: int | None, grouped_turns: bool = False
) -> AgentBroker:
    """A started broker over no-op runs with ``agents`` agents registered (``max_concurrent``: its run cap;
    ``grouped_turns``: the runs' turn writes join the queue's group commit)."""
    settings = BrokerSettings(queue=QueueSettings(mode="followup", cap=10_000))
    if max_concurrent is not None:
        settings = dataclasses.replace(settings, max_concurrent=max_concurrent)
    writes = _GroupedTurnWrites(ledger) if grouped_turns else _TurnWrites(ledger.database)
    broker = AgentBroker(ledger, _Runner(writes), settings)  # type: ignore[arg-type]
    await broker.start()
    for n in range(agents):
        await ledger.sessions.ensure(NewSession(f"agent:a{n}"))
        broker.register_agent(AgentIdentity(f"a{n}", f"agent:a{n}"))
    return broker


def run_broker(
    directory: Path,
    messages: int,
    agents: int = 100,
    *,
    served: bool = True,
    max_concurrent: int | None = None,
    paced_rate: float | None = None,
    from_due: bool = False,
    grouped_turns: bool = False,
) -> dict[str, float]:
    """``rate`` (msg/s), ``p99`` (send ms), ``cpu_us`` (per message) through ``AgentBroker``, concurrent senders.

    ``served``: WAL checkpoints on their own thread, as ``nexus serve`` and the drains run the
    broker (``nexus.ledger._checkpoint``); otherwise every checkpoint runs in a commit on the loop.
    ``max_concurrent``: the global cap on runs at once (default: the broker's, 8).
    ``paced_rate``: send at this many messages a second (open loop: each send is due at its
    time whether or not earlier ones returned, and its latency counts from when it was due);
    otherwise in waves of ``agents`` messages, each wave sent at once. The latency is the
    sender's: from its call of ``send`` until ``send`` returned; ``from_due`` counts it from when
    the message was due instead (adds the pacing loop's own lateness, up to the loop's 1 ms
    timer resolution). ``grouped_turns``: the no-op runs' turn writes join the queue's group
    commit (``SqlQueueStore.grouped``), as the engine's do, instead of sharing a transaction of
    their own per loop round (not a row of the table: for instruction counts of that path).
    """

    async def main() -> dict[str, float]:
        with Ledger.open(directory / "agents.db") as ledger, contextlib.ExitStack() as stack:
            if served:
                stack.enter_context(background_checkpoints(ledger.database))
            broker = await _started_broker(ledger, agents, max_concurrent, grouped_turns)
            latencies: list[float] = []

            async def send(n: int, due: float | None = None) -> None:
                t0 = time.perf_counter() if due is None or not from_due else due
                await broker.send(AgentMessage(id=f"m{n}", from_="user", to=f"a{n % agents}", content=f"task {n}"))
                latencies.append((time.perf_counter() - t0) * 1000)

            cpu0, start = time.process_time(), time.perf_counter()
            if paced_rate is None:
                for wave in range(0, messages, agents):
                    await asyncio.gather(*(send(n) for n in range(wave, min(wave + agents, messages))))
            else:
                await _paced(send, messages, paced_rate, start)
            for n in range(agents):
                await broker.wait_for_idle(f"a{n}")
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
            await broker.close()
            return {"rate": messages / elapsed, "p99": _p99(latencies), "cpu_us": cpu / messages * 1e6}

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


def _child(row: str, messages: int, paced_rate: float, gc_mode: str, loop: str = "asyncio") -> dict[str, float]:
    """One measurement of one nexus row, in this (fresh) process, after a short warm-up of the same row."""
    if gc_mode == "tuned":
        tune_gc_for_many_runs()
    if loop == "uvloop":  # what nexus serve runs on when uvloop is installed (nexus.cli.serve_cmd)
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if row == "store":
        with tempfile.TemporaryDirectory() as tmp:
            run_nexus(Path(tmp), min(500, messages))  # warm-up: imports, page cache
        with tempfile.TemporaryDirectory() as tmp:
            return run_nexus(Path(tmp), messages)
    options = _variants(paced_rate)[row]
    with tempfile.TemporaryDirectory() as tmp:
        run_broker(Path(tmp), min(500, messages), **{**options, "paced_rate": None})
    with tempfile.TemporaryDirectory() as tmp:
        return run_broker(Path(tmp), messages, **options)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--peers", action="store_true", help="also measure persist-queue (see --peer-python)")
    parser.add_argument("--peer-python", default=None, help="the interpreter that has persist-queue")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paced-rate", type=float, default=13_000, help="offered msg/s of the paced rows")
    parser.add_argument(
        "--paced-messages",
        type=int,
        default=50_000,
        help="messages of each paced row (50,000 at 13,000/s: ~4 s sustained, many WAL cycles)",
    )
    parser.add_argument("--floor-messages", type=int, default=20_000, help="messages of each floor row")
    parser.add_argument(
        "--gc",
        choices=("tuned", "default"),
        default="tuned",
        help="tuned: the collector settings nexus serve runs with (every nexus row); default: CPython's",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the nexus rows' event loop: asyncio's (the drains'), or uvloop (nexus serve's when installed)",
    )
    parser.add_argument(
        "--also-src", action="append", default=[], metavar="LABEL=DIR", help="also run the nexus rows from this tree"
    )
    parser.add_argument("--child", nargs=2, metavar=("ROW", "MESSAGES"), help=argparse.SUPPRESS)
    return parser


SRC = str(Path(__file__).resolve().parents[1] / "src")
SCRIPT = str(Path(__file__).resolve())
FLOOR_SCRIPT = str(Path(__file__).resolve().with_name("_sqlite_floor.py"))


def _peer_python(given: str | None) -> str:
    default = Path("/tmp/peerbench/venv-queue/bin/python")
    return given or (str(default) if default.exists() else sys.executable)


def _rounds(args: argparse.Namespace, trees: list[tuple[str, str]]) -> dict[str, list[dict[str, float]]]:
    """Every row of every tree, ``--rounds`` times, the rows alternating within each round."""
    results: dict[str, list[dict[str, float]]] = {}
    rows = ["store", *_variants(args.paced_rate)]
    common = ["--paced-rate", str(args.paced_rate), "--gc", args.gc, "--loop", args.loop]
    for _ in range(args.rounds):
        for batch in (1, floor_mod.BATCH):
            name = "one per step" if batch == 1 else f"batches of {batch}"
            measured = floor_mod.child(FLOOR_SCRIPT, None, ["floor", str(args.floor_messages), str(batch)])
            results.setdefault(name, []).append(measured)
        for row in rows:
            count = args.paced_messages if "paced" in row else args.messages
            for label, src in trees:
                measured = floor_mod.child(SCRIPT, src, [row, str(count), *common])
                results.setdefault(f"{row}@{label}", []).append(measured)
        if args.peers:
            python = _peer_python(args.peer_python)
            try:
                measured = floor_mod.child(FLOOR_SCRIPT, None, ["persist-queue", str(args.messages), "0"], python)
            except RuntimeError as exc:
                print(f"persist-queue could not run in {python}: {str(exc).splitlines()[-1]}; no ratio printed")
                args.peers = False
                continue
            results.setdefault("persist-queue", []).append(measured)
    return results


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def _print_table(
    args: argparse.Namespace, trees: list[tuple[str, str]], results: dict[str, list[dict[str, float]]]
) -> None:
    floors = {name: {k: _median(results[name], k) for k in ("rate", "cpu_us")} for name in
              ("one per step", f"batches of {floor_mod.BATCH}")}  # fmt: skip
    head = f"{'row':<72} {'msg/s':>8} {'p99 ms':>8} {'CPU us':>7} {'1/CPU':>8}"
    print(f"{head} {'x1 msg/s':>8} {'x1 CPU':>8} {'x32 msg/s':>8} {'x32 CPU':>8}")
    names = [*floors, "persist-queue"] + [
        f"{row}@{label}" for row in ["store", *_variants(args.paced_rate)] for label, _ in trees
    ]
    for name in names:
        if name not in results:
            continue
        rate, p99, cpu = (_median(results[name], key) for key in ("rate", "p99", "cpu_us"))
        row, _, label = name.partition("@")
        title = _title(row) + (f" [{label}]" if label else "")
        cells = f"{rate:>8,.0f} {p99:>8.3f} {cpu:>7.1f} {1e6 / cpu:>8,.0f}"
        print(f"{title:<72} {cells} {floor_mod.ratios(rate, cpu, floors)}")
    for label, _ in trees[1:]:
        print(f"\nCPU per message, {label} / this tree (same rounds; > 1: this tree is cheaper):")
        for row in ["store", *_variants(args.paced_rate)]:
            before, after = _median(results[f"{row}@{label}"], "cpu_us"), _median(results[f"{row}@"], "cpu_us")
            print(f"  {_title(row):<70} {before:>7.1f} / {after:>7.1f} = {before / after:.2f}x")


def _title(row: str) -> str:
    if row == "store":
        return "nexus BrokerStore (one at a time)"
    if row in ("one per step", f"batches of {floor_mod.BATCH}", "persist-queue"):
        return f"floor: stdlib sqlite3, {row}" if row != "persist-queue" else "persist-queue SQLiteAckQueue"
    return f"nexus AgentBroker, 100 agents, {row}"


_LEGEND = """(median of {rounds} rounds. msg/s: wall clock; CPU us: process CPU time per message; 1/CPU: the
 msg/s one core would give at that CPU cost. x1 / x32: the row over the stdlib-sqlite3 floor of one message
 per step / batches of 32, by msg/s and by CPU per message (targets: >= 0.9 and >= 0.25). 'burst': each wave
 of 100 sent at once, so its p99 is a wave queueing behind itself; 'paced': one message every 1/rate s, open
 loop, latency from the sender's call of send to its return, {paced:,} messages, msg/s until the last one was
 delivered (target: 13,000/s sustained, p99 < 2 ms). 'checkpoint thread' is how nexus serve and the drains
 run it; 'cap' is max_concurrent, the runs allowed at once (default 8))"""


def main() -> int:
    args = _parser().parse_args()
    if args.child is not None:
        row, count = args.child
        print(json.dumps(_child(row, int(count), args.paced_rate, args.gc, args.loop)))
        return 0
    print(_machine.header("bench_broker_queue.py: durable accept -> claim -> delivered"))
    trees = [("", SRC), *(cast(tuple[str, str], tuple(item.split("=", 1))) for item in args.also_src)]
    load = os.getloadavg()[0]
    print(f"# gc: {args.gc}; loop: {args.loop}; {args.rounds} rounds, each row in a fresh process; load {load:.2f}")
    results = _rounds(args, trees)
    _print_table(args, trees, results)
    print(_LEGEND.format(rounds=args.rounds, paced=args.paced_messages))
    if not args.peers:
        print("(peers not requested: run with --peers to measure persist-queue in the same run)")
    elif "persist-queue" in results and "store@" in results:
        ratio = _median(results["store@"], "rate") / _median(results["persist-queue"], "rate")
        print(f"one at a time, nexus BrokerStore is {ratio:.2f}x the messages/s of persist-queue in this run")
    print(_machine.load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
