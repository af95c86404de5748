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
           also ``Agent.prompt`` on a reset agent, and a sync (threaded) tool.
  history  one ``Agent`` conversation of N turns; turn k re-sends the whole history (4 messages per turn).
           Reports the mean of turns 1-100 and of the last 100 turns and the slope in us per history item.

  .venv/bin/python bench/bench_loop.py [--turns 1000] [--reps 3] [--peers-live] [--peers-live-history TURNS]

--peers-live runs /work/shared/peerbench/run_loop.py (needs `bash setup.sh` there first) and prints those
numbers next to ours; otherwise the recorded baselines are printed.
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

from nexus.agent import Agent, AgentContext, AgentLoopConfig, agent_loop, tool
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
MODEL = Model(id="canned", provider="canned", api="canned")

# peer-baselines.md §2a / §2b (passes A / B), us per turn, and us per history item per turn
PEERS_FRESH = [
    ("openai-agents (canned, tracing on)", 2684, 2894),
    ("openai-agents (canned, tracing off)", 2255, 2502),
    ("LangGraph ainvoke", 4566, 3342),
    ("LangGraph invoke (sync)", 2990, 2534),
    ("pydantic-ai agent.run", 5330, 4262),
]
PEERS_HISTORY = [  # (name, first 100 ms A/B, last 100 ms A/B, us per item A/B)
    ("pydantic-ai", (21.3, 12.7), (210, 220), (52, 58)),
    ("openai-agents (canned)", (9.7, 9.4), (162, 170), (42, 45)),
    ("LangGraph (async)", (3.8, 4.7), (17.6, 20.9), (3.8, 4.5)),
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


def make_agent_turn(stream: Any, reset: bool) -> tuple[Agent, Callable[[], Awaitable[None]]]:
    agent = Agent(model=MODEL, stream_fn=stream, tools=[echo])
    agent.subscribe(lambda ev: None)  # a listener, as an app would have

    async def turn() -> None:
        if reset:
            agent.reset()
        await agent.prompt("go")

    return agent, turn


async def time_turns(turn: Callable[[], Awaitable[None]], turns: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        await turn()
    gc.collect()
    per_turn = []
    for _ in range(turns):
        t0 = time.perf_counter()
        await turn()
        per_turn.append(time.perf_counter() - t0)
    return per_turn


# --------------------------------------------------------------------------- runs (each in a fresh process)


def child(variant: str, turns: int) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        stream = scripted_stream() if variant.startswith("scripted") else canned_stream
        if variant in ("fresh_loop", "scripted_fresh"):
            per = await time_turns(make_fresh_turn(stream, echo), turns)
        elif variant == "fresh_loop_sync_tool":
            per = await time_turns(make_fresh_turn(stream, echo_sync), turns)
        elif variant == "fresh_agent":
            per = await time_turns(make_agent_turn(stream, reset=True)[1], turns)
        elif variant == "history":
            agent, turn = make_agent_turn(stream, reset=False)
            per = await time_turns(turn, turns, warmup=0)
            assert len(agent.state.messages) == 4 * turns
        else:
            raise SystemExit(f"unknown variant {variant}")
        return {
            "us_per_turn": statistics.fmean(per) * 1e6,
            "first100_us": statistics.fmean(per[:100]) * 1e6,
            "last100_us": statistics.fmean(per[-100:]) * 1e6,
            "turn10_us": statistics.median(per[5:15]) * 1e6,
            "rss_after_mb": rss_mb(),
            "peak_rss_mb": peak_rss_mb(),
        }

    return asyncio.run(go())


def run_child(variant: str, turns: int, reps: int) -> dict[str, Any]:
    runs = []
    for _ in range(reps):
        out = subprocess.run(
            [sys.executable, __file__, "--child", variant, "--turns", str(turns)],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    med["all"] = [round(r["us_per_turn"], 1) for r in runs]
    return med


def peers_live(mode: str, turns: int, ours: float) -> str:
    """Run the peers' own benchmark here (one process per variant) and add the ratio to our number."""
    script = os.path.join(PEERBENCH, "run_loop.py")
    if not os.path.exists("/tmp/peerbench/venv-lg/bin/python"):
        return "(peer venvs missing: run `bash /work/shared/peerbench/setup.sh` first)"
    out_json = f"/tmp/nexus_bench_loop_peers_{mode}.json"
    args = [sys.executable, script, "--mode", mode, "--turns", str(turns), "--reps", "1", "--json", out_json]
    subprocess.run(args, capture_output=True, text=True, check=False, timeout=1800)
    try:
        with open(out_json) as f:
            results = json.load(f)["results"]
    except (OSError, ValueError, KeyError):
        return "(peer run failed)"
    if mode == "fresh":
        lines = ["| peer | variant | us/turn | ratio peer / nexus |", "|---|---|---|---|"]
        for r in results:
            us = r["us_per_turn"]
            lines.append(f"| {r['framework']} | {r['variant']} | {us:.0f} | {us / ours:.0f}x |")
    else:
        lines = ["| peer | turns 1-100 us | last 100 us | us per history item | last-100 ratio peer / nexus |"]
        lines.append("|---|---|---|---|---|")
        for r in results:
            slope = (r["last100_us"] - r["first100_us"]) / (4 * (turns - 100))
            lines.append(
                f"| {r['framework']} | {r['first100_us']:.0f} | {r['last100_us']:.0f} | {slope:.1f} | "
                f"{r['last100_us'] / ours:.0f}x |"
            )
    return "\n".join(lines)


def _report_fresh(turns: int, reps: int) -> float:
    """Print the fresh-run table and the recorded peers; returns nexus fresh_loop us/turn (the ratio base)."""
    print("\n## fresh: every turn a new run (prompt -> tool call -> tool -> final text)\n")
    print("| variant | us/turn | runs | RSS after MB | peak RSS MB |")
    print("|---|---|---|---|---|")
    fresh: dict[str, dict[str, Any]] = {}
    variants = ["fresh_loop", "fresh_agent", "fresh_loop_sync_tool"]
    try:
        import nexus.testing  # noqa: F401

        variants.append("scripted_fresh")
    except ImportError:
        pass
    for v in variants:
        m = fresh[v] = run_child(v, turns, reps)
        print(f"| {v} | {m['us_per_turn']:.1f} | {m['all']} | {m['rss_after_mb']:.0f} | {m['peak_rss_mb']:.0f} |")
    ours: float = fresh["fresh_loop"]["us_per_turn"]
    print(f"\n### vs peers (recorded, peer-baselines.md §2a); ratio = peer / nexus fresh_loop ({ours:.0f} us)\n")
    print("| peer | us/turn A / B | ratio A / B |")
    print("|---|---|---|")
    for name, pa, pb in PEERS_FRESH:
        print(f"| {name} | {pa} / {pb} | {pa / ours:.0f}x / {pb / ours:.0f}x |")
    return ours


def _report_history(turns: int) -> dict[str, Any]:
    """Print the one-long-conversation table against the recorded peers; returns the nexus measurements."""
    h = run_child("history", turns, 1)
    slope = (h["last100_us"] - h["first100_us"]) / (4 * (turns - 100))
    print(f"\n## history: one {turns}-turn conversation via Agent.prompt (4 messages per turn)\n")
    print("| | turn ~10 us | turns 1-100 us | last 100 turns us | us per history item | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    print(
        f"| nexus | {h['turn10_us']:.0f} | {h['first100_us']:.0f} | {h['last100_us']:.0f} | {slope:.3f} | "
        f"{h['peak_rss_mb']:.0f} |"
    )
    for name, f100, l100, per in PEERS_HISTORY:
        print(
            f"| {name} (recorded A/B) | | {f100[0] * 1000:.0f} / {f100[1] * 1000:.0f} | "
            f"{l100[0] * 1000:.0f} / {l100[1] * 1000:.0f} | {per[0]} / {per[1]} | |"
        )
    last_ratio = [(l100[0] * 1000 / h["last100_us"], name) for name, _, l100, _ in PEERS_HISTORY]
    print("\nlast-100-turns ratio (peer A / nexus): " + ", ".join(f"{n} {r:.0f}x" for r, n in last_ratio))
    return h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child")
    ap.add_argument("--peers-live", action="store_true", help="also run the peers' fresh benchmark here")
    ap.add_argument("--peers-live-history", type=int, default=0, help="also run the peers' history mode, N turns")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.turns)))
        return
    print(
        f"# nexus agent loop, {a.turns} turns per process, median of {a.reps} processes, "
        f"python {sys.version.split()[0]}"
    )
    ours = _report_fresh(a.turns, a.reps)
    h = _report_history(a.turns)
    if a.peers_live:
        print("\n## peers measured live on this machine (fresh, 1 process each)\n")
        print(peers_live("fresh", a.turns, ours))
    if a.peers_live_history:
        print(f"\n## peers measured live on this machine (history, {a.peers_live_history} turns)\n")
        print(
            f"(nexus last-100 at {a.turns} turns: {h['last100_us']:.0f} us; its first-100: {h['first100_us']:.0f} us)\n"
        )
        print(peers_live("history", a.peers_live_history, h["last100_us"]))


if __name__ == "__main__":
    main()
