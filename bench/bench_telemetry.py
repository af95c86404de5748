"""What telemetry costs per turn: off, metrics, tracing, both — interleaved in one process, with the floor.

Each turn is a whole engine run against the loopback fake provider over HTTP (a separate
``python -m nexus.testing.fake_server`` process): a model call that asks for ``ls``, the tool,
a second model call with the reply, and the turn written to the SQLite ledger — the turn of
``bench/bench_engine_http.py``. Per turn with everything on that is one run span, two
model-call spans, one tool span, their attributes, and the metrics of each.

Three measurements, their processes alternating in every round:

- **modes, interleaved in one process** (the overhead): blocks of ``--turns`` turns, the four
  modes in turn, the order rotated every block, so noise hits them alike (the spread between
  processes on this shared machine is larger than what telemetry costs):
  ``off`` (the default), ``metrics`` (``nexus.telemetry.enable_metrics()``, what ``nexus serve``
  does), ``tracing`` (the OpenTelemetry SDK, a ``BatchSpanProcessor`` whose exporter drops the
  batches: recording and batching are measured, not a collector's network; flushed after each
  block, outside the timing), ``both``;
- **off against the tree before** (``--also-src NAME=PATH``): ``off`` in a process of its own with
  this tree and with each other tree: tracing off must cost what no telemetry at all cost;
- **the floor**: no engine, no HTTP: per turn, the same four spans made with the OpenTelemetry SDK
  by hand (one current run span, two model-call spans, one current tool span, as many attributes
  as ours, the same batch processor) and the same ``prometheus_client`` observations as a turn's
  metrics: what any instrumentation of this turn pays. Above it is nexus' own cost.

``--model scripted`` takes the model calls off the wire (a ``ScriptedModel`` registered with
``nexus.llm``, so they still pass where telemetry hooks in): a cheaper turn (the ledger's writes
remain), the same overhead in µs.

Cells are CPU µs per turn of the process doing the turns (its threads included: the SDK's batch
thread; the fake server runs apart), the median over blocks or rounds.

    .venv/bin/python bench/bench_telemetry.py [--turns 100] [--blocks 5] [--rounds 3] [--also-src before=../old/src]
    .venv/bin/python bench/bench_telemetry.py --model scripted   # the same turn without HTTP (a steadier number)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _machine

SRC = Path(__file__).resolve().parents[1] / "src"
MODES = ("off", "metrics", "tracing", "both")
WARMUP = 20
FLOOR_SPAN_ATTRIBUTES = {"run": (7, 10), "chat": (8, 11), "tool": (4, 0)}
"""Attributes set per span at its start and at its end, as many as nexus' spans of this turn carry."""


def _provider() -> Any:
    """A ``TracerProvider`` whose batches are dropped: recording and batching, not a collector's network."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return provider


def _home(url: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix="nexus-bench-telemetry-"))
    (home / "workspace").mkdir()
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{url}"\napi_key = "test"\n',
        encoding="utf-8",
    )
    os.environ["NEXUS_HOME"] = str(home)
    return home


class _Turns:
    """A ``Runtime`` over the ledger of a fresh home; :meth:`timed` runs turns and returns (wall, CPU) µs per turn.

    ``scripted``: the model is a ``ScriptedModel`` registered with ``nexus.llm`` (no HTTP, the
    model calls still pass through ``nexus.llm.stream``); else the fake server.
    """

    def __init__(self, runtime: Any, scripted: bool) -> None:
        from nexus.engine import AgentSpec

        self.runtime = runtime
        self.scripted: Any = None
        if scripted:
            from nexus.testing import ScriptedModel

            self.scripted = ScriptedModel().register()
            os.environ.setdefault("SCRIPTED_API_KEY", "unused")  # the pre-flight asks every provider for a key
        self.spec = AgentSpec(model=self.scripted.model if scripted else None)
        self.n = 0

    async def timed(self, turns: int) -> tuple[float, float]:
        from nexus.testing.steps import text, tool_call

        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(turns):
            self.n += 1
            if self.scripted is not None:
                self.scripted.append(tool_call("ls", {}), text("done"))
                self.scripted.calls.clear()
            result = await self.runtime.start(self.spec, f"s{self.n}", "list the files").result
            assert result.error is None, result.error
        return (time.perf_counter() - wall) / turns * 1e6, (time.process_time() - cpu) / turns * 1e6


async def _modes(url: str, turns: int, blocks: int, scripted: bool) -> dict[str, list[list[float]]]:
    """Per mode, [wall, CPU] µs per turn of each block (the modes interleaved, see the module docstring)."""
    from nexus import telemetry
    from nexus.config import load_config
    from nexus.engine import Runtime
    from nexus.ledger import Ledger

    home = _home(url)
    provider = _provider()
    found: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    with Ledger.open(home / "agents.db") as ledger:
        runner = _Turns(Runtime(load_config(), ledger), scripted)
        for block in range(-1, blocks):  # block -1: every mode once, untimed (warm-up)
            for mode in MODES[block % len(MODES) :] + MODES[: block % len(MODES)]:
                telemetry.disable()
                if mode in ("metrics", "both"):
                    telemetry.enable_metrics()
                if mode in ("tracing", "both"):
                    telemetry.enable_tracing(provider)
                measured = await runner.timed(WARMUP // len(MODES) if block < 0 else turns)
                provider.force_flush()  # the block's spans leave before the next block starts
                if block >= 0:
                    found[mode].append(list(measured))
    return found


async def _off(url: str, turns: int, scripted: bool) -> list[float]:
    """[wall, CPU] µs per turn with telemetry untouched (runs with any tree's nexus, before or after)."""
    from nexus.config import load_config
    from nexus.engine import Runtime
    from nexus.ledger import Ledger

    home = _home(url)
    with Ledger.open(home / "agents.db") as ledger:
        runner = _Turns(Runtime(load_config(), ledger), scripted)
        await runner.timed(WARMUP)
        return list(await runner.timed(turns))


def _floor(turns: int) -> dict[str, float]:
    """CPU µs per turn of the floor's spans and of its metrics (see the module docstring)."""
    from opentelemetry import trace
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    tracer = trace.get_tracer("floor", tracer_provider=_provider())

    def attrs(kind: str, at_end: bool) -> dict[str, Any]:
        return {f"floor.{kind}.{i}": i for i in range(FLOOR_SPAN_ATTRIBUTES[kind][at_end])}

    def spans() -> None:
        run = tracer.start_span("invoke_agent floor", attributes=attrs("run", False))
        with trace.use_span(run, end_on_exit=False):
            for n in range(2):
                chat = tracer.start_span("chat floor", kind=trace.SpanKind.CLIENT, attributes=attrs("chat", False))
                chat.set_attributes(attrs("chat", True))
                chat.end()
                if n == 0:
                    with tracer.start_as_current_span("execute_tool ls", attributes=attrs("tool", False)):
                        pass
        run.set_attributes(attrs("run", True))
        run.end()

    r = CollectorRegistry()
    in_flight = Gauge("floor_runs", "", ["agent"], registry=r)
    run_s = Histogram("floor_run_s", "", ["agent", "status"], registry=r)
    calls = Counter("floor_calls", "", ["provider", "model"], registry=r)
    call_s = Histogram("floor_call_s", "", ["provider", "model"], registry=r)
    first_s = Histogram("floor_first_s", "", ["provider", "model"], registry=r)
    tokens = Counter("floor_tokens", "", ["provider", "model", "type"], registry=r)
    cost = Counter("floor_cost", "", ["provider", "model"], registry=r)
    tool_s = Histogram("floor_tool_s", "", ["tool"], registry=r)

    def observations() -> None:
        in_flight.labels("(none)").inc()
        for n in range(2):
            calls.labels("fake", "fake-model").inc()
            call_s.labels("fake", "fake-model").observe(0.01)
            first_s.labels("fake", "fake-model").observe(0.005)
            for kind in ("input", "output", "cache_read", "cache_write"):
                tokens.labels("fake", "fake-model", kind).inc(10)
            cost.labels("fake", "fake-model").inc(0.0)
            if n == 0:
                tool_s.labels("ls").observe(0.001)
        in_flight.labels("(none)").dec()
        run_s.labels("(none)", "end_turn").observe(0.02)

    found = {}
    for name, work in (("tracing", spans), ("metrics", observations)):
        for _ in range(WARMUP * 10):
            work()
        cpu = time.process_time()
        for _ in range(turns):
            work()
        found[name] = (time.process_time() - cpu) / turns * 1e6
    return found


def child(kind: str, args: argparse.Namespace) -> None:
    if kind == "modes":
        print(json.dumps(asyncio.run(_modes(args.url, args.turns, args.blocks, args.model == "scripted"))))
    elif kind == "off":
        print(json.dumps(asyncio.run(_off(args.url, args.turns * args.blocks, args.model == "scripted"))))
    else:
        print(json.dumps(_floor(args.turns * args.blocks * 10)))  # cheap: many turns, a steadier number


def _fake_server(turns: int) -> tuple[subprocess.Popen[str], str]:
    step = [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"text": "done"}]
    script = Path(tempfile.mkdtemp(prefix="nexus-bench-script-")) / "steps.json"
    script.write_text(json.dumps(step * (turns + 10)), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    server = subprocess.Popen(
        [sys.executable, "-m", "nexus.testing.fake_server", "--script", str(script)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    if not url.startswith("http://"):
        server.kill()
        raise SystemExit(f"the fake server did not start: {server.stderr.read() if server.stderr else ''}")
    return server, f"{url}/v1"


def _run_child(kind: str, args: argparse.Namespace, url: str, src: Path) -> Any:
    cmd = [sys.executable, __file__, "--child", kind, "--url", url,
           "--turns", str(args.turns), "--blocks", str(args.blocks), "--model", args.model]  # fmt: skip
    out = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} ({src}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _paired(modes: dict[str, list[list[float]]], mode: str, column: int) -> tuple[float, float, float]:
    """``mode`` minus ``off`` block by block (the blocks of one rotation ran side by side): median, min, max."""
    diffs = [row[column] - off[column] for row, off in zip(modes[mode], modes["off"], strict=True)]
    return statistics.median(diffs), min(diffs), max(diffs)


def _print_tables(modes: dict[str, list[list[float]]], trees: dict[str, list[list[float]]], floor: list[Any]) -> None:
    cpu = {mode: statistics.median(row[1] for row in rows) for mode, rows in modes.items()}
    print("Modes interleaved in one process. CPU µs per turn: the median of the blocks; over off: the median of")
    print("each block's difference to the off block of the same rotation (and their range):\n")
    print("| mode | CPU µs/turn | CPU over off | differences, min to max | wall over off |")
    print("|---|---|---|---|---|")
    overhead: dict[str, float] = {}
    for mode in MODES:
        if mode == "off":
            print(f"| off | {cpu[mode]:.0f} | — | — | — |")
            continue
        overhead[mode], low, high = _paired(modes, mode, 1)
        wall = _paired(modes, mode, 0)[0]
        over = f"{overhead[mode]:+.0f} µs ({overhead[mode] / cpu['off']:+.1%})"
        print(f"| {mode} | {cpu[mode]:.0f} | {over} | {low:+.0f} to {high:+.0f} | {wall:+.0f} µs |")
    spans = statistics.median(row["tracing"] for row in floor)
    observed = statistics.median(row["metrics"] for row in floor)
    print("\nThe floor: the SDKs alone, no engine (CPU µs per turn), and nexus' cost above it:\n")
    print("| what | floor | nexus over off | nexus' own, over the floor |")
    print("|---|---|---|---|")
    for name, mode, base in (("4 spans, OpenTelemetry SDK", "tracing", spans),
                             ("a turn's observations, prometheus_client", "metrics", observed),
                             ("both", "both", spans + observed)):  # fmt: skip
        print(f"| {name} | {base:.1f} | {overhead[mode]:+.0f} | {overhead[mode] - base:+.0f} |")
    if len(trees) > 1:
        print("\nTracing off, this tree against the others (each its own process per round):\n")
        print("| tree | CPU µs/turn | rounds | this tree over it |")
        print("|---|---|---|---|")
        here = statistics.median(row[1] for row in trees["this tree"])
        for name, rows in trees.items():
            median = statistics.median(row[1] for row in rows)
            than = "—" if name == "this tree" else f"{here - median:+.0f} µs ({here / median - 1:+.1%})"
            print(f"| {name} | {median:.0f} | {', '.join(f'{row[1]:.0f}' for row in rows)} | {than} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="turns per block")
    parser.add_argument("--blocks", type=int, default=5, help="blocks per mode in each process")
    parser.add_argument("--rounds", type=int, default=3)
    also = "also run `off` with the nexus of another src dir (the tree before), in the same rounds"
    parser.add_argument("--also-src", action="append", default=[], metavar="NAME=PATH", help=also)
    turn = "http: the fake provider over loopback HTTP; scripted: a ScriptedModel in process (no I/O but SQLite)"
    parser.add_argument("--model", choices=("http", "scripted"), default="http", help=turn)
    parser.add_argument("--child", choices=("modes", "off", "floor"))
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    how = "over loopback HTTP" if args.model == "http" else "from a ScriptedModel, no HTTP"
    print(_machine.header(f"Telemetry cost per engine turn (two model calls and a tool {how})"))
    sources = {"this tree": SRC} | {name: Path(path) for name, path in (item.split("=", 1) for item in args.also_src)}
    per_round = WARMUP + args.turns * args.blocks * len(MODES) + len(sources) * (WARMUP + args.turns * args.blocks)
    server, url = _fake_server(per_round * args.rounds)
    modes: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    trees: dict[str, list[list[float]]] = {name: [] for name in sources}
    floor: list[Any] = []
    jobs = [("modes", "this tree"), *(("off", name) for name in sources if len(sources) > 1), ("floor", "this tree")]
    try:
        for round_ in range(args.rounds):
            for kind, name in jobs[round_ % len(jobs) :] + jobs[: round_ % len(jobs)]:
                found = _run_child(kind, args, url, sources[name])
                if kind == "modes":
                    for mode, rows in found.items():
                        modes[mode] += rows
                elif kind == "off":
                    trees[name].append(found)
                else:
                    floor.append(found)
    finally:
        server.terminate()
        server.wait()
    print(f"\n{args.rounds} rounds; {args.blocks} blocks of {args.turns} turns per mode and process; order rotated\n")
    _print_tables(modes, trees, floor)
    print(_machine.load_line())


if __name__ == "__main__":
    main()
