#!/usr/bin/env python3
"""Agent-loop overhead with no I/O, against the peers measured in shared/reference/peer-baselines.md §2.

One turn = a user prompt -> model response calling a trivial tool ``echo(x: int)`` -> the tool runs
(pydantic-validated, built with ``nexus.agent.tool``) -> a second model response with the final text.
That is 2 model calls and 1 tool call per turn, exactly the peers' benchmark.

Models (no network): ``canned`` is a minimal stream function that emits start/toolcall/text/done events
directly (like the peers' canned models); ``scripted`` is ``nexus.testing.ScriptedModel`` (it deep-copies
every call's context and chunks the text, so it is test-double cost on top of the loop).

Modes:
  fresh    every turn is a new ``agent_loop`` run on an empty context (pure loop overhead);
           also with a sync (threaded) tool.
  history  one conversation of N turns (``agent_loop`` runs on one growing context, as the engine's are);
           turn k re-sends the whole history (4 messages per turn).
           Reports the mean of turns 1-100 and of the last 100 turns and the slope in us per history item.

  .venv/bin/python bench/bench_loop.py [--turns 1000] [--reps 3] [--peers] [--peers-history]

--peers also runs the peers' own loop benchmark (``/work/shared/peerbench/bench_loop.py``, or
``--peerbench DIR``) in their venvs (``/tmp/peerbench/venv-*``, or ``--peer-venvs DIR``), in fresh
processes interleaved with ours, and prints each ratio from that same run. Nothing is installed: a
peer whose venv is missing or cannot import it is reported and gets no ratio (bench/README.md says
how to get them). --peers-history does the same for the one-long-conversation mode, with the same
number of turns as ours (slow: pydantic-ai and openai-agents take ~1.5 minutes per 1,000 turns).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import _machine

from nexus.agent import AgentContext, AgentLoopConfig, agent_loop, tool
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
from nexus.llm.options import StreamOptions
from nexus.llm.types import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

PEERBENCH = "/work/shared/peerbench"
PEER_VENVS = "/tmp/peerbench"
MODEL = Model(id="canned", provider="canned", api="canned")

# the peers' variants (peerbench/bench_loop.py FRAMEWORK VARIANT): label, framework, variant, venv, module
PEERS_FRESH = [
    ("openai-agents Runner.run (canned model, tracing on)", "agents", "canned", "venv-oaiagents", "agents"),
    ("openai-agents Runner.run (canned model, tracing off)", "agents", "canned_notrace", "venv-oaiagents", "agents"),
    ("LangGraph ainvoke", "langgraph", "async", "venv-lg", "langgraph"),
    ("LangGraph invoke (sync)", "langgraph", "sync", "venv-lg", "langgraph"),
    ("pydantic-ai agent.run", "pydantic_ai", "async", "venv-pyai", "pydantic_ai"),
]
PEERS_HISTORY = [
    ("pydantic-ai", "pydantic_ai", "async", "venv-pyai", "pydantic_ai"),
    ("openai-agents (canned)", "agents", "canned", "venv-oaiagents", "agents"),
    ("LangGraph (async)", "langgraph", "async", "venv-lg", "langgraph"),
]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------- models and tools


async def canned_stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stateless canned model: answer a tool result with text, anything else with a tool call."""
    msg = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    yield StartEvent(msg)
    if isinstance(context.messages[-1], ToolResultMessage):
        block = TextContent("")
        msg.content.append(block)
        yield TextStartEvent(0, msg)
        block.text = "done"
        yield TextDeltaEvent(0, "done", msg)
        yield TextEndEvent(0, "done", msg)
        msg.stop_reason = "stop"
        yield DoneEvent("stop", msg)
    else:
        call = ToolCall("call_1", "echo", {"x": 1})
        msg.content.append(call)
        yield ToolCallStartEvent(0, msg)
        yield ToolCallEndEvent(0, call, msg)
        msg.stop_reason = "tool_use"
        yield DoneEvent("tool_use", msg)


@tool
async def echo(x: int) -> str:
    """Echo a number."""
    return str(x)


@tool(name="echo")
def echo_sync(x: int) -> str:
    """Echo a number (sync: runs in a worker thread)."""
    return str(x)


def scripted_stream() -> Any:
    from nexus.testing import ScriptedModel
    from nexus.testing.steps import text as text_step
    from nexus.testing.steps import tool_call

    scripted = ScriptedModel()

    async def stream(model: Model, context: Context, options: StreamOptions | None = None) -> Any:
        if not scripted.pending:
            scripted.append(tool_call("echo", {"x": 1}), text_step("done"))
        scripted.calls.clear()  # the double records every call; keep memory flat
        async for ev in scripted.stream(model, context, options):
            yield ev

    return stream


# --------------------------------------------------------------------------- turns


def make_fresh_turn(stream: Any, tool_obj: Any) -> Callable[[], Awaitable[None]]:
    config = AgentLoopConfig(MODEL, stream_fn=stream)

    async def turn() -> None:
        ctx = AgentContext("", [], [tool_obj])
        async for _ in agent_loop(UserMessage("go"), ctx, config):
            pass
        assert len(ctx.messages) == 4, ctx.messages

    return turn


def make_history_turn(stream: Any) -> tuple[AgentContext, Callable[[], Awaitable[None]]]:
    """Turns of one conversation: each run appends to the same context (its LLM view cached across runs)."""
    config = AgentLoopConfig(MODEL, stream_fn=stream)
    ctx = AgentContext("", [], [echo])

    async def turn() -> None:
        async for _ in agent_loop(UserMessage("go"), ctx, config):
            pass

    return ctx, turn


async def time_turns(turn: Callable[[], Awaitable[None]], turns: int, warmup: int = 20) -> list[float]:
    """Wall seconds of each timed turn; the CPU seconds of them all go to ``CPU_SECONDS[0]``."""
    for _ in range(warmup):
        await turn()
    gc.collect()
    per_turn = []
    cpu = time.process_time()
    for _ in range(turns):
        t0 = time.perf_counter()
        await turn()
        per_turn.append(time.perf_counter() - t0)
    CPU_SECONDS[0] = time.process_time() - cpu
    return per_turn


CPU_SECONDS = [0.0]


# --------------------------------------------------------------------------- runs (each in a fresh process)


def child(variant: str, turns: int) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        stream = scripted_stream() if variant.startswith("scripted") else canned_stream
        if variant in ("fresh_loop", "scripted_fresh"):
            per = await time_turns(make_fresh_turn(stream, echo), turns)
        elif variant == "fresh_loop_sync_tool":
            per = await time_turns(make_fresh_turn(stream, echo_sync), turns)
        elif variant == "history":
            ctx, turn = make_history_turn(stream)
            per = await time_turns(turn, turns, warmup=0)
            assert len(ctx.messages) == 4 * turns
        else:
            raise SystemExit(f"unknown variant {variant}")
        return {
            "us_per_turn": statistics.fmean(per) * 1e6,
            "cpu_us_per_turn": CPU_SECONDS[0] / len(per) * 1e6,
            "first100_us": statistics.fmean(per[:100]) * 1e6,
            "last100_us": statistics.fmean(per[-100:]) * 1e6,
            "turn10_us": statistics.median(per[5:15]) * 1e6,
            "rss_after_mb": rss_mb(),
            "peak_rss_mb": peak_rss_mb(),
        }

    return asyncio.run(go())


Job = tuple[str, list[str]]  # (label, command printing one JSON line)


def nexus_job(variant: str, turns: int) -> Job:
    return variant, [sys.executable, __file__, "--child", variant, "--turns", str(turns)]


def peer_jobs(peers: list[tuple[str, str, str, str, str]], a: argparse.Namespace, mode: str) -> list[Job]:
    """Commands for the peers that can run here; prints why the others cannot (nothing is installed)."""
    script = os.path.join(a.peerbench, "bench_loop.py")
    jobs: list[Job] = []
    for label, framework, variant, venv, module in peers:
        python = os.path.join(a.peer_venvs, venv, "bin", "python")
        problem = None
        if not os.path.exists(script):
            problem = f"{script} not found"
        elif not os.path.exists(python):
            problem = f"{python} not found"
        elif subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False).returncode:
            problem = f"`import {module}` fails in {python}"
        if problem is not None:
            print(f"peer not measured, no ratio: {label}: {problem} (see bench/README.md)")
            continue
        cmd = [python, script, framework, variant, "--turns", str(a.turns), "--mode", mode]
        jobs.append((label, cmd))
    return jobs


def _run(cmd: list[str]) -> tuple[dict[str, Any] | str, float]:
    """The JSON line a child prints (or its last error line) and the CPU seconds the child used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or ["?"])[-1], cpu
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result, cpu


def _one_turn(cmd: list[str]) -> list[str]:
    """The same command with ``--turns 1``: its CPU is the process's fixed cost (imports, setup, warm-up)."""
    i = cmd.index("--turns")
    return [*cmd[: i + 1], "1", *cmd[i + 2 :]]


def run_jobs(jobs: list[Job], reps: int, cpu_diff: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Run every job ``reps`` times, round-robin (so load drift hits all alike); medians per job.

    For the jobs in ``cpu_diff`` (the peers, whose benchmark reports wall time only) the same command
    also runs with one turn, and ``cpu_diff_us`` is the process CPU time of the full run minus that of
    the one-turn run, per extra turn: the CPU cost of a turn, with imports and setup cancelled out.
    """
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in jobs}
    for _ in range(reps):
        for label, cmd in jobs:
            r, cpu = _run(cmd)
            if isinstance(r, str):
                print(f"{label} failed: {r}")
                continue
            if label in cpu_diff:
                _, fixed = _run(_one_turn(cmd))
                turns = int(cmd[cmd.index("--turns") + 1])
                r["cpu_diff_us"] = (cpu - fixed) / max(turns - 1, 1) * 1e6
            r.setdefault("rss_after_mb", r.get("rss_after_setup_mb", 0.0))
            runs[label].append(r)
    medians: dict[str, dict[str, Any]] = {}
    for label, rs in runs.items():
        if rs:
            keys = ("us_per_turn", "first100_us", "last100_us", "rss_after_mb", "peak_rss_mb")
            med: dict[str, Any] = {k: statistics.median(r[k] for r in rs) for k in keys}
            med["turn10_us"] = statistics.median(r.get("turn10_us", 0.0) for r in rs)
            med["cpu_us"] = statistics.median(r.get("cpu_us_per_turn", 0.0) for r in rs)
            med["cpu_diff_us"] = statistics.median(r.get("cpu_diff_us", 0.0) for r in rs)
            med["all"] = [round(r["us_per_turn"], 1) for r in rs]
            medians[label] = med
    return medians


def _report_fresh(a: argparse.Namespace) -> None:
    """The fresh-run table; with --peers, the peers measured in the same rounds and their ratios."""
    variants = ["fresh_loop", "fresh_loop_sync_tool", "scripted_fresh"]
    jobs = [nexus_job(v, a.turns) for v in variants]
    peers = peer_jobs(PEERS_FRESH, a, "fresh") if a.peers else []
    diff = frozenset(label for label, _ in peers)  # nexus measures its turns' CPU in process, exactly
    res = run_jobs(jobs + peers, a.reps, diff)
    print(f"\n## fresh: every turn a new run (prompt -> tool call -> tool -> final text), median of {a.reps}\n")
    print("| variant | µs/turn | runs | CPU µs/turn, timed | CPU µs/turn, by difference | RSS after MB | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for label, _ in jobs + peers:
        if label in res:
            m = res[label]
            cpu = f"{m['cpu_us']:.1f}" if m["cpu_us"] else "-"
            by_diff = f"{m['cpu_diff_us']:.1f}" if m["cpu_diff_us"] else "-"
            print(
                f"| {label} | {m['us_per_turn']:.1f} | {m['all']} | {cpu} | {by_diff} | {m['rss_after_mb']:.0f} | "
                f"{m['peak_rss_mb']:.0f} |"
            )
    if not a.peers:
        print("\n(peers not measured, no ratios: add --peers; see bench/README.md)")
        return
    ours = res.get("fresh_loop")
    measured = [label for label, _ in peers if label in res]
    if ours is None or not measured:
        print("\n(no peer measured: no ratios)")
        return
    base, base_cpu = ours["us_per_turn"], ours["cpu_us"]
    print(
        f"\nratio = peer / nexus fresh_loop, all measured in this run: wall ({base:.1f} µs), and CPU "
        f"({base_cpu:.1f} µs; steadier on a loaded machine). CPU per turn: nexus times its turns in process; "
        "a peer's benchmark prints wall time only, so its CPU per turn is its process's CPU minus that of the "
        "same command with one turn, divided by the extra turns.\n"
    )
    for label in measured:
        cpu_ratio = res[label]["cpu_diff_us"] / base_cpu if base_cpu > 0 else float("nan")
        print(f"- {label}: {res[label]['us_per_turn'] / base:.0f}x wall, {cpu_ratio:.0f}x CPU")


def _report_history(a: argparse.Namespace) -> None:
    """One long conversation (nexus, and with --peers-history the peers at the same length)."""
    jobs = [nexus_job("history", a.turns)]
    peers = peer_jobs(PEERS_HISTORY, a, "history") if a.peers_history else []
    res = run_jobs(jobs + peers, 1)
    print(f"\n## history: one {a.turns}-turn conversation (4 messages per turn), 1 process each\n")
    print("| | turn ~10 µs | turns 1-100 µs | last 100 turns µs | µs per history item | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for label, _ in jobs + peers:
        if label not in res:
            continue
        h = res[label]
        slope = (h["last100_us"] - h["first100_us"]) / (4 * (a.turns - 100))
        turn10 = f"{h['turn10_us']:.0f}" if h["turn10_us"] else ""
        name = "nexus agent_loop" if label == "history" else label
        print(
            f"| {name} | {turn10} | {h['first100_us']:.0f} | {h['last100_us']:.0f} | {slope:.3f} | "
            f"{h['peak_rss_mb']:.0f} |"
        )
    ours = res.get("history")
    measured = [label for label, _ in peers if label in res]
    if ours is None or not measured:
        if not a.peers_history:
            print("\n(peers' history not measured, no ratios: add --peers-history; see bench/README.md)")
        return
    print("\nlast-100-turns ratio, peer / nexus, same run: ", end="")
    print(", ".join(f"{label} {res[label]['last100_us'] / ours['last100_us']:.0f}x" for label in measured))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child")
    ap.add_argument("--peers", action="store_true", help="also run the peers' fresh benchmark (if installed)")
    ap.add_argument("--peers-history", action="store_true", help="also run the peers' history mode (slow)")
    ap.add_argument("--peerbench", default=os.environ.get("PEERBENCH_DIR", PEERBENCH))
    ap.add_argument("--peer-venvs", default=os.environ.get("PEER_VENVS", PEER_VENVS))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.turns)))
        return
    print(_machine.header(f"bench_loop.py: agent loop, {a.turns} turns per process, median of {a.reps} processes"))
    _report_fresh(a)
    _report_history(a)
    print(_machine.load_line())


if __name__ == "__main__":
    main()
