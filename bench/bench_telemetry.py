"""What telemetry costs per turn: off, metrics on, tracing on, both — fresh processes, interleaved.

Each turn is a whole engine run against the loopback fake provider over HTTP (a separate
``python -m nexus.testing.fake_server`` process): a model call that asks for ``ls``, the tool,
a second model call with the reply, and the turn written to the SQLite ledger — the turn of
``bench/bench_engine_http.py``. Per turn with everything on that is one run span, two
model-call spans, one tool span, their attributes, and the metrics of each.

Modes (each its own process per round; the order rotates every round, so machine noise
spreads over all of them):

- ``off``: the default — no OpenTelemetry import, no metrics;
- ``metrics``: ``nexus.telemetry.enable_metrics()`` (what ``nexus serve`` does by default);
- ``tracing``: the OpenTelemetry SDK with a ``BatchSpanProcessor`` whose exporter drops the
  batches (recording and batching are measured, not a collector's network);
- ``both``: metrics and tracing.

Prints µs per turn (median of the rounds) and each mode's overhead over ``off``.

    .venv/bin/python bench/bench_telemetry.py [--turns 300] [--rounds 3]
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

import _machine

SRC = Path(__file__).resolve().parents[1] / "src"
MODES = ("off", "metrics", "tracing", "both")


def _steps(turns: int) -> list[dict[str, object]]:
    step = [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"text": "done"}]
    return step * (turns + 10)


def _enable(mode: str) -> None:
    from nexus import telemetry

    if mode in ("metrics", "both"):
        telemetry.enable_metrics()
    if mode in ("tracing", "both"):
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Dropped(SpanExporter):
            def export(self, spans: object) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        telemetry.enable_tracing(provider)


async def _turns(home: Path, turns: int, warmup: int) -> float:
    from nexus.config import load_config
    from nexus.engine.wiring.runner import EngineEnv
    from nexus.ledger import Ledger

    with Ledger.open(home / "agents.db") as ledger:
        env = EngineEnv.from_config(load_config(), ledger)
        model = env.model(None)
        started = 0.0
        for n in range(warmup + turns):
            if n == warmup:
                started = time.perf_counter()
            result = await env.start(env.assemble("list the files", session=f"s{n}", model=model), model=model).result
            assert result.error is None, result.error
        return (time.perf_counter() - started) / turns * 1e6


def child(mode: str, turns: int, warmup: int, url: str) -> None:
    home = Path(tempfile.mkdtemp(prefix="nexus-bench-telemetry-"))
    (home / "workspace").mkdir()
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{url}"\napi_key = "test"\n',
        encoding="utf-8",
    )
    os.environ["NEXUS_HOME"] = str(home)
    _enable(mode)
    print(json.dumps({"mode": mode, "us_per_turn": asyncio.run(_turns(home, turns, warmup))}))


def _fake_server(turns: int, rounds: int) -> tuple[subprocess.Popen[str], str]:
    script = Path(tempfile.mkdtemp(prefix="nexus-bench-script-")) / "steps.json"
    script.write_text(json.dumps(_steps((turns + 20) * rounds * len(MODES))), encoding="utf-8")
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
    return server, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.turns, args.warmup, args.url)
        return
    print(_machine.header("Telemetry cost per engine turn (two model calls and a tool over loopback HTTP)"))
    server, url = _fake_server(args.turns + args.warmup, args.rounds)
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for round_ in range(args.rounds):
            order = MODES[round_ % len(MODES) :] + MODES[: round_ % len(MODES)]
            for mode in order:
                cmd = [sys.executable, __file__, "--child", mode, "--turns", str(args.turns),
                       "--warmup", str(args.warmup), "--url", f"{url}/v1"]  # fmt: skip
                out = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{mode} failed:\n{out.stderr[-2000:]}")
                results[mode].append(json.loads(out.stdout.strip().splitlines()[-1])["us_per_turn"])
    finally:
        server.terminate()
        server.wait()
    base = statistics.median(results["off"])
    print(f"\n{args.turns} turns per process after {args.warmup} warm-up, {args.rounds} rounds, order rotated\n")
    print("| mode | µs per turn (median) | all rounds | overhead over off |")
    print("|---|---|---|---|")
    for mode in MODES:
        median = statistics.median(results[mode])
        rounds = ", ".join(f"{value:.0f}" for value in results[mode])
        overhead = "—" if mode == "off" else f"{median - base:+.0f} µs ({median / base - 1:+.1%})"
        print(f"| {mode} | {median:.0f} | {rounds} | {overhead} |")
    print(_machine.load_line())


if __name__ == "__main__":
    main()
