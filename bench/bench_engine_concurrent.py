#!/usr/bin/env python3
"""1,000 concurrent executions in one process: event-loop lag and memory per execution / idle session.

Each execution is one turn of its own session on one ``Runtime`` (real SQLite ledger in a temp
``NEXUS_HOME``): a scripted model streaming about 20 tokens/s calls the ``ls`` tool, then answers
with ~20 tokens — so a turn lasts about two seconds and all of them overlap.

The scripted model is a test double, and its pacing is loop work a real provider's stream does not
cost the same way. Its paced waits share one loop timer per 1 ms tick and each stream listens for its
abort once (``nexus.testing._pacing``); before that change each chunk had its own timer and abort
listener, over half of the loop's work per chunk here, so figures from earlier trees include more of the
double's work (the engine's own work per chunk is unchanged by it).

Measured:
  lag p50/p99/max   how late a 1 ms ticker on the same event loop wakes up while the 1,000 run
                    (what any other coroutine — a socket, a timer — would wait); target p99 < 5 ms
  lag while start   the same, from the last ``runtime.start`` call until every run is past its starting
                    step (session lock, reads, assembly, turn open): a burst's starting steps used to be
                    ready in one round of the loop, which then stood still for over a second (the ``max``)
  RSS / active      (RSS with all executions streaming - RSS before) / executions; what the benchmark itself
                    holds per execution is its handle in one list and one callback shared by all (earlier
                    trees made a closure per execution, ~0.15 KB a run more)
  lag (loop CPU)    the same ticks, each counted only as far as the loop thread was busy meanwhile
                    (its CPU time over the tick): what the lag would be on a machine with a free core.
                    On a loaded machine the wall lag also holds the time the OS gave other processes
  loop CPU          CPU time of the event-loop thread over the streaming phase (the ledger writer
                    thread is not in it)
  RSS / idle        (RSS after every run ended, sessions loaded - RSS before) / sessions, once the benchmark
                    has dropped its own handles on the executions and their results. RSS keeps the run phase's
                    high-water mark (CPython returns freed memory to the OS in whole arenas only), so this is
                    mostly the peak per run; ``--retained`` counts what stays allocated instead
  retained          (``--retained``: tracemalloc on for the whole run, so lags and RSS are not comparable)
                    Python memory still allocated per active execution and per idle session, the runtime's
                    caches included

``--gc tuned`` calls ``nexus.engine.wiring.gc_tuning.tune_gc_for_many_runs()`` before the starts (what a
long-lived host such as ``nexus serve`` does); ``--gc default`` keeps CPython's thresholds.
``--start burst`` (default, the scenario of the target) calls ``runtime.start`` 1,000 times back
to back: the loop is blocked for all the assemblies, and every stream then ticks in step with
the others. ``--start yield`` lets the loop run after every 10 starts, as a server starting runs
for arriving messages does (the starts then spread over a second or more).

  .venv/bin/python bench/bench_engine_concurrent.py [--executions 1000] [--tps 20] [--gc tuned|default]
                                                    [--start yield|burst] [--repeat-answer N] [--retained]
                                                    [--slow-iterations MS]

``--slow-iterations MS`` also prints what the loop's iterations over MS ms of loop CPU while streaming were
made of: how many, how many held a garbage collection, and their callbacks by CPU (a task's steps under its
coroutine's name). It wraps every callback of the loop, so its lags are not comparable with a run without it.

``--repeat-answer N`` makes each answer N times as long, so that starts spread over a second
(``--start yield``) still leave a window where all executions stream together; that window is
reported on its own (from the last start to the first end).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import _machine
from _loop_iterations import SlowIterations

from nexus.config import load_config
from nexus.engine import AgentSpec, Execution, Runtime
from nexus.ledger import Ledger, NewSession
from nexus.testing import ScriptedModel, by_session
from nexus.testing.steps import text, tool_call

YIELD_EVERY = 10
"""``--start yield``: starts between two yields to the loop (~2-3 ms of assembly)."""

ANSWER = "The workspace holds two files; both look fine and nothing else needs doing here today."


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


async def ticker(stop: asyncio.Event, lags: list[float], cpu_lags: list[float], stamps: list[float]) -> None:
    """Sleep 1 ms at a time and record how late each wake-up is (wall, and as far as the loop was busy)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        expected = loop.time() + 0.001
        cpu = time.thread_time()
        await asyncio.sleep(0.001)
        lag = max(0.0, loop.time() - expected)
        lags.append(lag)
        cpu_lags.append(min(lag, time.thread_time() - cpu))
        stamps.append(loop.time())


class GcPauses:
    """Collections per generation and the longest pause (CPU time of the collecting thread)."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.longest = [0.0, 0.0, 0.0]
        self.began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.began = time.thread_time()
            return
        generation = info["generation"]
        self.count[generation] += 1
        self.longest[generation] = max(self.longest[generation], time.thread_time() - self.began)

    def summary(self) -> str:
        return ", ".join(f"gen{g} {self.count[g]} (longest {self.longest[g] * 1000:.1f} ms)" for g in range(3))


def percentiles(values: list[float]) -> str:
    """p50 / p99 / max of ``values`` (seconds) in ms."""
    ms = sorted(x * 1000 for x in values)
    if not ms:
        return "no samples"
    p99 = ms[max(0, int(len(ms) * 0.99) - 1)]
    return f"p50 {statistics.median(ms):.2f} ms, p99 {p99:.2f} ms, max {ms[-1]:.2f} ms"


async def start_all(runtime: Runtime, spec: AgentSpec, labels: list[str], burst: bool) -> list[Execution]:
    """Start one execution per session: back to back (``burst``), or yielding to the loop every few starts."""
    running = []
    for i, label in enumerate(labels):
        running.append(runtime.start(spec, label, "list the files and tell me about them"))
        if not burst and i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    return running


class Retained:
    """Python memory allocated now minus at the first reading (tracemalloc), or nothing when not asked for."""

    def __init__(self, on: bool) -> None:
        self.on = on
        if on:
            tracemalloc.start()
        self.start = self.now()

    def now(self) -> int:
        return tracemalloc.get_traced_memory()[0] if self.on else 0

    def per(self, count: int) -> str:
        return f"{(self.now() - self.start) / count / 1024:.1f} KB" if self.on else "not counted (--retained)"


async def _setup(executions: int, tps: float, repeat: int) -> tuple[Ledger, Runtime, AgentSpec, list[str]]:
    """A fresh home and ledger, a runtime whose stream is each session's scripted model, and the sessions."""
    home = Path(tempfile.mkdtemp(prefix="nexus-bench-conc-"))
    os.environ["NEXUS_HOME"] = str(home)
    # the specs name no model and the stream is scripted: any model ref will do, but one must resolve
    # without the offline model's [local] extra
    os.environ.setdefault("NEXUS_MODEL", "openai/gpt-4o-mini")
    models: dict[str, ScriptedModel] = {}

    stream = by_session(models)

    ledger = Ledger.open(home / "agents.db")
    runtime = Runtime(load_config(), ledger, stream_fn=stream)
    spec = AgentSpec(id="bench", tools=("ls",))
    labels = [f"s{i:04d}" for i in range(executions)]
    for label in labels:
        answer = " ".join([ANSWER] * repeat)
        models[label] = ScriptedModel([tool_call("ls", {}, id="c1"), text(answer)], tokens_per_second=tps, record=False)
        await ledger.sessions.ensure(NewSession(label))
    return ledger, runtime, spec, labels


class _Measured:
    """What one run of every execution at once measured (:func:`_measure`), for :func:`_report`."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.cpu_lags: list[float] = []
        self.stamps: list[float] = []
        self.finishes: list[float] = []
        self.start_ms = self.elapsed = self.streaming_s = self.loop_cpu = self.all_started = self.assembled = 0.0
        self.before = self.active = self.idle = self.live = self.steady_from = 0
        self.retained_active = self.retained_idle = ""
        self.failed = 0
        self.pauses = GcPauses()
        self.slow: SlowIterations | None = None


def _finished(finishes: list[float], loop: asyncio.AbstractEventLoop, _result: object) -> None:
    finishes.append(loop.time())


async def _measure(
    runtime: Runtime, spec: AgentSpec, labels: list[str], burst: bool, retained: bool, slow_ms: float | None = None
) -> _Measured:
    """Start every execution, measure memory while they stream and after they ended, and the loop's lag."""
    m, executions = _Measured(), len(labels)
    traced = Retained(retained)
    m.before = rss_bytes()
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(stop, m.lags, m.cpu_lags, m.stamps))
    started = time.perf_counter()
    running = await start_all(runtime, spec, labels, burst)
    m.start_ms = (time.perf_counter() - started) * 1000
    loop = asyncio.get_running_loop()
    m.all_started = loop.time()
    finished = functools.partial(_finished, m.finishes, loop)  # one callback for all: not a closure per run
    for execution in running:
        execution.result.add_done_callback(finished)
    await asyncio.gather(*(e.wait_started() for e in running))
    m.assembled = loop.time()
    await asyncio.sleep(max(0.0, m.all_started + 0.5 - loop.time()))  # every execution is streaming by now
    m.active = rss_bytes()
    m.retained_active = traced.per(executions)
    m.live = len(runtime.live())
    m.steady_from = len(m.lags)
    loop_cpu = time.thread_time()
    streaming_from = time.perf_counter()
    gc.callbacks.append(m.pauses)
    if slow_ms is not None:
        m.slow = SlowIterations(slow_ms / 1000)
        m.slow.start(loop)
    results = await asyncio.gather(*(e.result for e in running))
    if m.slow is not None:
        m.slow.stop()
    gc.callbacks.remove(m.pauses)
    m.loop_cpu = time.thread_time() - loop_cpu
    m.streaming_s = time.perf_counter() - streaming_from
    m.elapsed = time.perf_counter() - started
    stop.set()
    await tick
    m.failed = len([r for r in results if r.stop_reason != "end_turn"])
    del running, results  # what stays is the runtime's, not this script's handles on 1,000 finished runs
    gc.collect()
    m.idle = rss_bytes()
    m.retained_idle = traced.per(executions)
    return m


def _report(m: _Measured, runtime: Runtime, executions: int, tps: float, tuned_gc: bool, burst: bool) -> None:
    together = [i for i, t in enumerate(m.stamps) if m.all_started < t <= min(m.finishes)]
    together_s = min(m.finishes) - m.all_started
    lags, cpu_lags = m.lags, m.cpu_lags
    print(_machine.header("1,000 concurrent executions (engine v2: Runtime.start)"))
    print(f"executions {executions}, scripted model {tps:g} tokens/s, one tool call each; wall {m.elapsed:.1f} s; "
          f"gc {'tuned' if tuned_gc else 'default'}")  # fmt: skip
    how = "back to back" if burst else "yielding between starts"
    print(f"failed runs: {m.failed}; starting all {executions} ({how}) took {m.start_ms:.0f} ms; "
          f"{m.live} running together 0.5 s later (or once all had started, if later)")  # fmt: skip
    # the ticks that ended after the burst and began (went to sleep) before the last run was past its starting step
    starting = [i for i, t in enumerate(m.stamps) if m.all_started < t and t - lags[i] - 0.001 < m.assembled]
    print(f"event-loop lag while the {executions} runs start ({(m.assembled - m.all_started) * 1000:.0f} ms from the "
          f"last start call until every run is past its starting step, {len(starting)} ticks): "
          f"{percentiles([lags[i] for i in starting])}; "
          f"loop CPU only: {percentiles([cpu_lags[i] for i in starting])}")  # fmt: skip
    print(f"event-loop lag while streaming: {percentiles(lags[m.steady_from :])}")
    print(f"event-loop lag while all {executions} run ({together_s:.1f} s, last start to first end): "
          f"{percentiles([lags[i] for i in together])}; "
          f"loop CPU only: {percentiles([cpu_lags[i] for i in together])}")  # fmt: skip
    print(f"event-loop lag while streaming, loop CPU only: {percentiles(cpu_lags[m.steady_from :])}")
    print(f"event-loop lag, whole run: {percentiles(lags)} ({len(lags)} ticks)")
    print(f"loop thread CPU while streaming: {m.loop_cpu * 1000:.0f} ms over {m.streaming_s * 1000:.0f} ms "
          f"({m.loop_cpu / m.streaming_s:.0%} busy)")  # fmt: skip
    print(f"garbage collections while streaming: {m.pauses.summary()}")
    if m.slow is not None:
        print(m.slow.summary())
    print(
        f"RSS per active execution: {(m.active - m.before) / executions / 1024:.1f} KB; retained: {m.retained_active}"
    )
    print(
        f"RSS per idle loaded session: {(m.idle - m.before) / executions / 1024:.1f} KB (the run phase's high-water "
        f"mark); retained: {m.retained_idle}, of which the session caches "
        f"{runtime.sessions.nbytes / executions / 1024:.1f} KB by their own count (bounded at "
        f"{runtime.sessions.max_bytes / 2**20:.0f} MB)"
    )
    print(_machine.load_line())


async def main(
    executions: int,
    tps: float,
    tuned_gc: bool = True,
    burst: bool = False,
    repeat: int = 1,
    retained: bool = False,
    slow_ms: float | None = None,
) -> None:
    ledger, runtime, spec, labels = await _setup(executions, tps, repeat)
    gc.collect()
    if tuned_gc:
        from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs

        tune_gc_for_many_runs()
    measured = await _measure(runtime, spec, labels, burst, retained, slow_ms)
    _report(measured, runtime, executions, tps, tuned_gc, burst)
    ledger.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--tps", type=float, default=20.0)
    parser.add_argument("--gc", choices=("tuned", "default"), default="tuned")
    parser.add_argument("--start", choices=("burst", "yield"), default="burst")
    parser.add_argument("--repeat-answer", type=int, default=1, help="answer text repeated N times (longer turns)")
    parser.add_argument("--retained", action="store_true", help="count retained Python memory (tracemalloc; slower)")
    parser.add_argument("--slow-iterations", type=float, metavar="MS", help="what the loop iterations over MS ran")
    args = parser.parse_args()
    burst = args.start == "burst"
    asyncio.run(
        main(
            args.executions,
            args.tps,
            args.gc == "tuned",
            burst,
            args.repeat_answer,
            args.retained,
            args.slow_iterations,
        )
    )
