#!/usr/bin/env python3
"""The engine's own overhead per turn (no model I/O), against the agent loop alone and the peers.

One turn is the peers' turn (shared/reference/peer-baselines.md §2): prompt -> model calls tool
``echo(x)`` -> the tool runs -> model answers with text; 2 model calls + 1 tool call. The model is
a canned stream function (no network, no test-double bookkeeping); ``--scripted`` uses
``nexus.testing.ScriptedModel`` instead (it deep-copies every call's context).

Rows (in-process, µs per turn, mean of N turns after a warm-up; median of --reps repetitions):
  loop                  ``agent_loop`` on a fresh context: the agent layer alone
  execute, no ledger    ``execute(ctx)``: failover wrapper, payload repair, callbacks, result building
  execute + ledger      the same plus the ledger: open_turn, journal (assistant + tool call), write_turn
                        (SQLite WAL, synchronous=NORMAL), each turn in a new session
  assemble + execute    the full path of ``run_agent`` minus config loading: session, history, bootstrap
                        files, system prompt, budget, then execute + ledger
  history               one session of --history-turns turns; turn k is sent all earlier turns

Process rows (median of 5 fresh processes):
  first run             import + first and second run in a new process (peers §3 "first run")
  CLI-like process      ``python -c 'run_agent("hello")'`` against a loopback fake OpenAI server, with
                        the real HTTP provider (peers §5: ``pi -p "hello"``)

  .venv/bin/python bench/bench_engine.py [--turns 300] [--reps 3] [--history-turns 200] [--scripted] [--quick]

No peer runs here, so no ratio against a peer is printed (``--peers`` only says where they are measured).
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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import _machine

from nexus.agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, agent_loop
from nexus.ledger import NewSession
from nexus.llm.abort import AbortSignal
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.types import AssistantMessage, Context, Model, TextContent, ToolCall, ToolResultMessage, UserMessage

MODEL = Model(id="canned", provider="canned", api="canned")

NO_PEERS = (
    "peers: not measured by this script, so no ratios (a ratio needs both sides measured in one run); "
    "`bench_loop.py --peers` and `bench_engine_http.py` measure them live"
)


# --------------------------------------------------------------------------- model and tool


async def canned(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Call ``echo`` unless the last message is a tool result; then answer ``done``."""
    reply = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    yield StartEvent(reply)
    if not isinstance(context.messages[-1], ToolResultMessage):
        call = ToolCall("call_echo", "echo", {"x": 1})
        reply.content.append(call)
        yield ToolCallStartEvent(0, reply)
        yield ToolCallEndEvent(0, call, reply)
        reply.stop_reason = "tool_use"
        yield DoneEvent("tool_use", reply)
        return
    reply.content.append(TextContent("done"))
    yield TextStartEvent(0, reply)
    yield TextDeltaEvent(0, "done", reply)
    yield TextEndEvent(0, "done", reply)
    yield DoneEvent("stop", reply)


def scripted_factory() -> StreamFn:
    """A ScriptedModel that is topped up with (tool call, text) before each turn's first call."""
    from nexus.testing import ScriptedModel
    from nexus.testing.steps import text, tool_call

    scripted = ScriptedModel()

    async def stream(model: Model, context: Context, options: StreamOptions | None = None) -> Any:
        if not scripted.pending:
            scripted.append(tool_call("echo", {"x": 1}), text("done"))
        scripted.calls.clear()
        async for event in scripted.stream(model, context, options):
            yield event

    return stream


async def _echo(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text(str(args.get("x")))


ECHO = AgentTool("echo", "Echo a number.", {"type": "object", "properties": {"x": {"type": "integer"}}}, _echo)


# --------------------------------------------------------------------------- in-process rows


async def timed(turn: Callable[[int], Awaitable[object]], turns: int, warmup: int = 20) -> float:
    for i in range(warmup):
        await turn(-1 - i)
    start = time.perf_counter()
    for i in range(turns):
        await turn(i)
    return (time.perf_counter() - start) / turns * 1e6


def make_env(home: Path, stream_fn: StreamFn) -> Any:
    from nexus.config import load_config
    from nexus.engine import EngineLimits, Runtime
    from nexus.ledger import Ledger

    os.environ["NEXUS_HOME"] = str(home)
    ledger = Ledger.open(home / "agents.db")
    return Runtime(load_config(), ledger, stream_fn=stream_fn, limits=EngineLimits(subagent_max_depth=0), tools=[ECHO])


async def in_process_rows(turns: int, stream_fn: StreamFn) -> dict[str, float]:
    from nexus.engine.execution.execute import execute
    from nexus.engine.types import new_id

    rows: dict[str, float] = {}

    async def loop_turn(i: int) -> object:
        ctx = AgentContext("You are a benchmark.", [], [ECHO])
        config = AgentLoopConfig(model=MODEL, stream_fn=stream_fn)
        return [e async for e in agent_loop(UserMessage("go"), ctx, config)]

    rows["loop"] = await timed(loop_turn, turns)
    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp), stream_fn)
        base = await env.assemble("go", session="template", model=MODEL)

        async def execute_turn(i: int) -> object:
            ctx = replace(base, run_id=new_id(), history=[])
            return await execute(ctx, stream_fn=stream_fn, model=MODEL).result

        rows["execute, no ledger"] = await timed(execute_turn, turns)

        async def ledger_turn(i: int) -> object:
            label = f"s{i}"
            await env.ledger.sessions.create(NewSession(label))
            ctx = replace(base, run_id=new_id(), history=[], session_label=label, parent_turn_id=None)
            return await execute(ctx, stream_fn=stream_fn, model=MODEL, ledger=env.ledger).result

        rows["execute + ledger"] = await timed(ledger_turn, turns)

        async def full_turn(i: int) -> object:
            from nexus.engine import AgentSpec

            return await env.start(AgentSpec(model=MODEL), f"full{i}", "go").result

        rows["assemble + execute"] = await timed(full_turn, turns)
        env.ledger.close()
    return rows


async def history_row(turns: int, stream_fn: StreamFn) -> tuple[float, float, float]:
    """(mean µs of the first 20 turns, of the last 20, µs per history message)."""
    from nexus.engine import AgentSpec

    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp), stream_fn)
        times: list[float] = []
        for _ in range(turns):
            start = time.perf_counter()
            await (await env.begin(AgentSpec(model=MODEL), "long", "go")).result
            times.append((time.perf_counter() - start) * 1e6)
        env.ledger.close()
    window = min(20, turns // 4)
    first, last = statistics.mean(times[:window]), statistics.mean(times[-window:])
    items = (turns - window) * 4  # 4 messages per turn
    return first, last, (last - first) / items


# --------------------------------------------------------------------------- process rows

FIRST_RUN = r"""
import asyncio, json, os, sys, tempfile, time
t0 = time.perf_counter()
from nexus.engine import AgentSpec, Runtime
from nexus.config import load_config
from nexus.ledger import Ledger
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import bench_engine as b
t1 = time.perf_counter()
async def main():
    home = tempfile.mkdtemp()
    os.environ["NEXUS_HOME"] = home
    env = b.make_env(__import__("pathlib").Path(home), b.canned)
    out = []
    for _ in range(2):
        s = time.perf_counter()
        await env.start(AgentSpec(model=b.MODEL), "main", "go").result
        out.append((time.perf_counter() - s) * 1000)
    return out
first, second = asyncio.run(main())
print(json.dumps({"import_s": t1 - t0, "first_ms": first, "second_ms": second}))
"""

CLI_LIKE = "import asyncio; from nexus.engine import run_agent; asyncio.run(run_agent('hello'))"


def first_run_row(python: str) -> dict[str, float]:
    results = []
    for _ in range(5):
        out = subprocess.run([python, "-c", FIRST_RUN, os.path.abspath(__file__)], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"first-run child failed:\n{out.stderr}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {key: statistics.median(r[key] for r in results) for key in ("import_s", "first_ms", "second_ms")}


def process_row(python: str) -> tuple[float, float]:
    """(median ms of a one-turn run_agent process against a loopback server, of ``python -c pass``)."""
    from nexus.testing import FakeProviderServer
    from nexus.testing.steps import echo

    walls: list[float] = []
    bare: list[float] = []
    with FakeProviderServer() as server, tempfile.TemporaryDirectory() as home:
        server.default = echo
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
        env.update(NEXUS_HOME=home, NEXUS_MODEL="openai/fake-model", OPENAI_BASE_URL=server.openai_base_url)
        env["OPENAI_API_KEY"] = "sk-bench"
        subprocess.run([python, "-c", CLI_LIKE], env=env, check=True)  # warm-up (creates the DB and workspace)
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run([python, "-c", CLI_LIKE], env=env, check=True)
            walls.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            subprocess.run([python, "-c", "pass"], check=True)
            bare.append((time.perf_counter() - start) * 1000)
    return statistics.median(walls), statistics.median(bare)


# --------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--history-turns", type=int, default=200)
    parser.add_argument("--scripted", action="store_true", help="use nexus.testing.ScriptedModel as the model")
    parser.add_argument("--quick", action="store_true", help="in-process rows only (no child processes)")
    parser.add_argument("--peers", action="store_true", help="no effect here: see bench_loop.py --peers")
    args = parser.parse_args()
    print(_machine.header("bench_engine.py: engine overhead per turn, no I/O"))
    stream_fn: StreamFn = scripted_factory() if args.scripted else canned
    model_name = "ScriptedModel" if args.scripted else "canned stream function"

    reps = [asyncio.run(in_process_rows(args.turns, stream_fn)) for _ in range(args.reps)]
    rows = {key: statistics.median(r[key] for r in reps) for key in reps[0]}
    print(
        f"\nEngine overhead per tool turn (2 model calls + 1 tool), model = {model_name}, "
        f"{args.turns} turns x {args.reps}"
    )
    print(f"{'row':<24}{'µs/turn':>10}{'vs loop':>10}")
    for key, value in rows.items():
        print(f"{key:<24}{value:>10.0f}{value / rows['loop']:>9.2f}x")
    ledger_cost = rows["execute + ledger"] - rows["execute, no ledger"]
    engine_cost = rows["execute, no ledger"] - rows["loop"]
    print(
        f"  engine wrapper over the loop: {engine_cost:.0f} µs; "
        f"ledger (open + 2 journal rows + write): {ledger_cost:.0f} µs"
    )
    print(NO_PEERS)

    first, last, per_item = asyncio.run(history_row(args.history_turns, stream_fn))
    print(f"\nOne session of {args.history_turns} turns (assemble + execute + ledger, history re-read each turn)")
    print(f"  first turns {first:.0f} µs, last turns {last:.0f} µs  ->  {per_item:.2f} µs per history message per turn")

    if args.quick:
        print(_machine.load_line())
        return
    python = sys.executable
    fr = first_run_row(python)
    print(
        f"\nFresh process (median of 5): import {fr['import_s'] * 1000:.0f} ms, first run {fr['first_ms']:.1f} ms, "
        f"second run {fr['second_ms']:.1f} ms"
    )
    wall, bare = process_row(python)
    print(
        f"\nWhole process: run_agent('hello') against a loopback OpenAI-compatible server: {wall:.0f} ms "
        f"(bare python {bare:.0f} ms)"
    )
    print(_machine.load_line())


if __name__ == "__main__":
    main()
