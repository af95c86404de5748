#!/usr/bin/env python3
"""What journaling the streamed reply costs (crash journal, docs/engine.md), against the same run without it.

A canned stream function streams one long text reply through ``Runtime.start`` with a real
SQLite ledger (WAL, synchronous=NORMAL). Baseline = the same code with the streamed-reply
snapshots switched off (the journal thresholds set to infinity), i.e. the engine before the
feature: only the finished messages are journaled.

Rows:
  burst   the reply arrives as fast as the loop can take it (no I/O waits): µs per run and per delta
  paced   the reply arrives over ~1.5 s (a sleep every few deltas, like network reads): how late a
          1 ms ticker task on the same loop runs (p99 / max), i.e. whether journaling stalls the loop

  .venv/bin/python bench/bench_partial_journal.py [--kb 64] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import _machine

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution import _journal as journal_module
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import JournalEntry, JournalReply, Ledger
from nexus.ledger._turn_store import SqlTurnStore
from nexus.llm.events import AssistantMessageEvent, DoneEvent, StartEvent, TextDeltaEvent, TextStartEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, Model, TextContent

MODEL = Model(id="canned", provider="canned", api="canned")
PIECE = "sixteen chars.. "


def make_stream(deltas: int, every: int, pause: float) -> Any:
    """A stream function answering ``deltas`` 16-character pieces, sleeping ``pause`` s every ``every``."""

    async def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        reply = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(reply)
        block = TextContent("")
        reply.content.append(block)
        yield TextStartEvent(0, reply)
        for i in range(deltas):
            block.text += PIECE
            yield TextDeltaEvent(0, PIECE, reply)
            if pause and i % every == every - 1:
                await asyncio.sleep(pause)
        yield DoneEvent("stop", reply)

    return stream


class CountingTurns(SqlTurnStore):
    """Counts snapshot writes (journaled replies with ``complete=False``)."""

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        Counting.snapshots += sum(1 for e in entries if isinstance(e, JournalReply) and not e.complete)
        await super().journal(entries)


class Counting(Ledger):
    """A ledger whose turn store counts snapshot writes (:class:`CountingTurns`)."""

    snapshots = 0

    def __init__(self, db: Any, **options: Any) -> None:
        super().__init__(db, **options)
        self.turns = CountingTurns(db, message_cache=0)


def set_journal(on: bool) -> None:
    journal_module.PARTIAL_INTERVAL_S = 0.25 if on else float("inf")
    journal_module.PARTIAL_CHUNK_CHARS = 2048 if on else 1 << 62


async def one_run(env: Runtime, stream: Any, ticker: bool) -> tuple[float, list[float]]:
    """(µs for the run, lateness of each 1 ms tick in ms)."""
    env.stream_fn = stream
    late: list[float] = []
    stop = asyncio.Event()

    async def tick() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            due = loop.time() + 0.001
            await asyncio.sleep(0.001)
            late.append((loop.time() - due) * 1000)

    task = asyncio.create_task(tick()) if ticker else None
    start = time.perf_counter()
    await (await env.begin(AgentSpec(model=MODEL), f"s{time.perf_counter_ns()}", "write")).result
    took = (time.perf_counter() - start) * 1e6
    stop.set()
    if task is not None:
        await task
    return took, late


async def measure(deltas: int, runs: int, paced: bool) -> dict[bool, dict[str, float]]:
    """Runs without and with snapshots, alternating (so machine noise hits both alike)."""
    times: dict[bool, list[float]] = {False: [], True: []}
    lates: dict[bool, list[float]] = {False: [], True: []}
    snapshots = {False: 0, True: 0}
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Counting.open(Path(tmp) / "agents.db")
        env = Runtime(load_config(), ledger, stream_fn=None, cooldowns=ProfileCooldowns())
        stream = make_stream(deltas, 8, 1.5 / (deltas / 8)) if paced else make_stream(deltas, 1, 0.0)
        for on in (False, True):  # warm-up
            set_journal(on)
            await one_run(env, stream, False)
        for _ in range(runs):
            for on in (False, True):
                set_journal(on)
                Counting.snapshots = 0
                took, late = await one_run(env, stream, paced)
                times[on].append(took)
                lates[on].extend(late)
                snapshots[on] += Counting.snapshots
        ledger.close()
    out: dict[bool, dict[str, float]] = {}
    for on in (False, True):
        lates[on].sort()
        out[on] = {
            "us": statistics.median(times[on]),
            "snapshots": snapshots[on] / runs,
            "p99": lates[on][int(len(lates[on]) * 0.99)] if lates[on] else 0.0,
            "max": lates[on][-1] if lates[on] else 0.0,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=int, default=64, help="size of the streamed reply in KB")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="burst row only, 3 runs")
    parser.add_argument("--peers", action="store_true", help="no effect: the baseline runs every time")
    args = parser.parse_args()
    print(_machine.header("bench_partial_journal.py: crash journal of a streamed reply"))
    if args.peers:
        print("(no peer for this bench: its baseline, the same run with snapshots off, is measured every time)")
    os.environ.setdefault("NEXUS_HOME", tempfile.mkdtemp())
    deltas = args.kb * 1024 // len(PIECE)
    runs = 3 if args.quick else args.runs

    labels = {False: "baseline (no snapshots)", True: "with snapshots"}
    print(f"\nBurst: one {args.kb} KB reply in {deltas} deltas, execute + ledger, median of {runs} runs")
    print(f"{'':<28}{'µs/run':>10}{'µs/delta':>10}{'snapshots':>11}")
    burst = asyncio.run(measure(deltas, runs, paced=False))
    for on, r in burst.items():
        print(f"{labels[on]:<28}{r['us']:>10.0f}{r['us'] / deltas:>10.2f}{r['snapshots']:>11.1f}")
    print(f"  ratio with / baseline: {burst[True]['us'] / burst[False]['us']:.3f}x")
    if args.quick:
        print(_machine.load_line())
        return

    print(f"\nPaced: the same reply over ~1.5 s; lateness of a 1 ms ticker on the same loop, {runs} runs")
    print(f"{'':<28}{'p99 ms':>10}{'max ms':>10}{'snapshots':>11}")
    paced = asyncio.run(measure(deltas, runs, paced=True))
    for on, r in paced.items():
        print(f"{labels[on]:<28}{r['p99']:>10.2f}{r['max']:>10.2f}{r['snapshots']:>11.1f}")
    print(f"  ratio with / baseline (p99): {paced[True]['p99'] / max(paced[False]['p99'], 1e-9):.2f}x")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
