#!/usr/bin/env python3
"""The engine's own overhead per turn over real HTTP, next to pydantic-ai and openai-agents (issue 5).

One turn, the same for everyone: a fresh run with a short history (system prompt + one user message)
-> model call 1 answers with a tool call ``add {"a": 1, "b": 2}`` -> the tool runs -> model call 2
answers a short text. The "model" is the project's fake provider server
(``python -m nexus.testing.fake_server``), a separate process on 127.0.0.1 speaking OpenAI
chat-completions; every framework reaches it through its normal OpenAI-compatible HTTP path.

Rows (each one a fresh child process: --warmup turns, then --turns timed turns; median of --reps
processes, the variants interleaved round-robin so machine noise spreads over all of them):

  floor httpx, SSE       the two streamed requests made by hand: httpx 0.28 (the library nexus uses),
                         ``aiter_bytes`` split on blank lines + ``json.loads`` of every ``data:`` event,
                         tool run inline, response read to the end (keeps the connection alive)
  floor httpx2, SSE/JSON the same with httpx2 (the library the openai SDK and so both peers use),
                         streamed and non-streamed (``stream: false``, one JSON body per call)
  nexus engine           ``Runtime.assemble`` + ``start`` on a new session per turn: config from a
                         nexus.toml (provider ``fake``, ``openai-completions``, api_key "test"), one custom
                         ``@tool`` instead of the coding tools, ledger (SQLite) in a temp NEXUS_HOME
  nexus agent_loop       ``nexus.agent.agent_loop`` over ``nexus.llm.stream``: the loop alone
  pydantic-ai            ``OpenAIChatModel`` + ``OpenAIProvider(base_url, api_key)``, ``agent.run``
                         (non-streamed, its default) and ``agent.run`` with an ``event_stream_handler`` (SSE)
  openai-agents          ``OpenAIChatCompletionsModel`` + ``AsyncOpenAI``, tracing disabled;
                         ``Runner.run`` (non-streamed) and ``Runner.run_streamed`` (SSE)

"overhead" = the row's µs per turn minus the floor with the same HTTP library and wire mode
(nexus -> httpx SSE; peers -> httpx2 SSE or JSON): what the framework adds, the model excluded.
The server's own time and the loopback round trips are in the floor and cancel out.

  .venv/bin/python bench/bench_engine_http.py [--turns 200] [--warmup 20] [--reps 3] [--only a,b] [--peers]

Without ``--peers`` only the nexus rows and their httpx floor run. With it, the peer rows run too when
their venvs import them (nothing is installed; a missing one is reported and gets no row).

Peer venvs (skipped with a note when missing; override with BENCH_PYAI_PYTHON / BENCH_OAI_PYTHON):
  python3 -m venv /tmp/bench-pyai && /tmp/bench-pyai/bin/pip install "pydantic-ai-slim[openai]"
  python3 -m venv /tmp/bench-oai && /tmp/bench-oai/bin/pip install openai-agents
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _engine_http_children import ANSWER, ARGS, CONSTANTS, FLOOR, HARNESS, OAI, PROMPT, PYAI, SYSTEM

ROOT = Path(__file__).resolve().parent.parent
NEXUS_PYTHON = str(ROOT / ".venv" / "bin" / "python")
if not Path(NEXUS_PYTHON).exists():  # a checkout without its own venv (a git worktree): the running python
    NEXUS_PYTHON = sys.executable

PYAI_SETUP = 'python3 -m venv /tmp/bench-pyai && /tmp/bench-pyai/bin/pip install "pydantic-ai-slim[openai]"'
OAI_SETUP = "python3 -m venv /tmp/bench-oai && /tmp/bench-oai/bin/pip install openai-agents"


# --------------------------------------------------------------------------- nexus children (this file)


async def nexus_engine_setup(args: dict[str, Any]) -> tuple[Callable[[], Awaitable[None]], dict[str, str]]:
    """The whole engine path of one process: config, shared Runtime, assemble + start + ledger per turn."""
    from nexus.agent import tool
    from nexus.config import load_config
    from nexus.engine import AgentSpec, Runtime
    from nexus.ledger import Ledger

    home = Path(tempfile.mkdtemp(prefix="nexus-home-", dir=Path.cwd()))  # cwd = the run's temp dir
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n[agent]\nsubagent_max_depth = 0\n'
        f'[providers.fake]\napi = "openai-completions"\nbase_url = "{args["base_url"]}"\napi_key = "test"\n',
        encoding="utf-8",
    )
    os.environ["NEXUS_HOME"] = str(home)

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    env = Runtime(load_config(), Ledger.open(home / "agents.db"), tools=[add])
    counter = [0]

    async def turn() -> None:
        counter[0] += 1
        result = await (await env.begin(AgentSpec(), f"bench{counter[0]}", PROMPT)).result
        final = result.reply
        assert result.stop_reason == "end_turn" and len(result.tool_calls) == 1, (result.stop_reason, result.error)
        assert final == ANSWER, final

    return turn, nexus_versions()


async def nexus_loop_setup(args: dict[str, Any]) -> tuple[Callable[[], Awaitable[None]], dict[str, str]]:
    """The agent layer alone: ``agent_loop`` over ``nexus.llm.stream``, no engine, no ledger."""
    from nexus.agent import AgentContext, AgentLoopConfig, agent_loop, tool
    from nexus.llm import Model, StreamOptions, UserMessage
    from nexus.llm.types import AssistantMessage, TextContent

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = Model(id="fake-model", provider="fake", api="openai-completions", base_url=args["base_url"])
    config = AgentLoopConfig(model=model, options=StreamOptions(api_key="test"))

    async def turn() -> None:
        last: Any = None
        async for event in agent_loop(UserMessage(PROMPT), AgentContext(SYSTEM, [], [add]), config):
            if event.type == "agent_end":
                last = event.messages[-1]
        assert isinstance(last, AssistantMessage) and last.stop_reason == "stop", last
        assert [b.text for b in last.content if isinstance(b, TextContent)] == [ANSWER], last.content

    return turn, nexus_versions()


def nexus_versions() -> dict[str, str]:
    """Version facts printed with the result."""
    import importlib.metadata

    import nexus

    return {"nexus": nexus.__version__, "httpx": importlib.metadata.version("httpx")}


def child_main(kind: str, raw: str) -> None:
    """Entry point of a nexus child process (same JSON line as the peer HARNESS prints)."""
    args = json.loads(raw)
    setup = nexus_engine_setup if kind == "nexus-engine" else nexus_loop_setup

    async def go() -> tuple[float, float, dict[str, str]]:
        turn, versions = await setup(args)
        for _ in range(args["warmup"]):
            await turn()
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args["turns"]):
            await turn()
        return time.perf_counter() - wall, time.process_time() - cpu, versions

    wall, cpu, versions = asyncio.run(go())
    n = args["turns"]
    print(json.dumps({"us": wall / n * 1e6, "cpu_us": cpu / n * 1e6, "versions": versions}))


# --------------------------------------------------------------------------- orchestration


@dataclass(slots=True, frozen=True)
class Variant:
    """One row: how to start its child and which floor it is measured against."""

    name: str
    python: str | None  # None = venv missing
    source: str | None  # driver source for a peer venv; None = a nexus child of this file
    args: dict[str, str]
    floor: str | None  # name of the floor row it is compared with; None = it is a floor


def find_python(env_var: str, candidates: list[str], probe: str) -> str | None:
    """The first python that can run ``probe`` (imports), from $env_var or the candidates."""
    chosen = os.environ.get(env_var)
    for path in [chosen] if chosen else candidates:
        if Path(path).is_file() and subprocess.run([path, "-c", probe], capture_output=True).returncode == 0:
            return path
    return None


def variants() -> tuple[list[Variant], list[str]]:
    """Every row, with notes about the ones that cannot run here."""
    pyai = find_python(
        "BENCH_PYAI_PYTHON",
        ["/tmp/bench-pyai/bin/python", "/tmp/peerbench/venv-pyai/bin/python"],
        "import pydantic_ai.models.openai, pydantic_ai.providers.openai",
    )
    oai = find_python(
        "BENCH_OAI_PYTHON",
        ["/tmp/bench-oai/bin/python", "/tmp/peerbench/venv-oaiagents/bin/python"],
        "import agents, openai, httpx2",
    )
    notes = []
    if pyai is None:
        notes.append(f"pydantic-ai skipped: no venv with pydantic-ai-slim[openai]. Create it: {PYAI_SETUP}")
    if oai is None:
        notes.append(f"openai-agents and the httpx2 floors skipped: no venv with openai-agents. Create it: {OAI_SETUP}")
    rows = [
        Variant("floor httpx, SSE", NEXUS_PYTHON, FLOOR, {"lib": "httpx", "wire": "sse"}, None),
        Variant("floor httpx2, SSE", oai, FLOOR, {"lib": "httpx2", "wire": "sse"}, None),
        Variant("floor httpx2, JSON", oai, FLOOR, {"lib": "httpx2", "wire": "json"}, None),
        Variant("nexus engine (SSE)", NEXUS_PYTHON, None, {"kind": "nexus-engine"}, "floor httpx, SSE"),
        Variant("nexus agent_loop (SSE)", NEXUS_PYTHON, None, {"kind": "nexus-loop"}, "floor httpx, SSE"),
        Variant("pydantic-ai run (JSON)", pyai, PYAI, {"wire": "json"}, "floor httpx2, JSON"),
        Variant("pydantic-ai run, streamed (SSE)", pyai, PYAI, {"wire": "sse"}, "floor httpx2, SSE"),
        Variant("openai-agents Runner.run (JSON)", oai, OAI, {"wire": "json"}, "floor httpx2, JSON"),
        Variant("openai-agents run_streamed (SSE)", oai, OAI, {"wire": "sse"}, "floor httpx2, SSE"),
    ]
    return rows, notes


class FakeServer:
    """``python -m nexus.testing.fake_server`` in its own process, scripted for ``turns`` tool turns."""

    def __init__(self, turns: int, workdir: Path) -> None:
        step_pair = [{"tool_calls": [{"name": "add", "arguments": ARGS}]}, {"text": ANSWER}]
        script = workdir / f"script-{turns}.json"
        script.write_text(json.dumps(step_pair * turns), encoding="utf-8")
        cmd = [NEXUS_PYTHON, "-m", "nexus.testing.fake_server", "--script", str(script), "--no-echo"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise SystemExit(f"fake server did not start (first line {line!r})")
        self.base_url = line + "/v1"

    def stop(self) -> None:
        """SIGTERM, then wait (the server exits cleanly on SIGTERM)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_child(variant: Variant, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One fresh process of ``variant`` against a fresh fake server; returns its JSON result."""
    assert variant.python is not None
    server = FakeServer(args.warmup + args.turns, workdir)
    try:
        payload = {**variant.args, "base_url": server.base_url, "warmup": args.warmup, "turns": args.turns}
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
        if variant.source is None:
            env["PYTHONPATH"] = str(ROOT / "src")
            cmd = [variant.python, str(Path(__file__).resolve()), "--child", payload["kind"], json.dumps(payload)]
        else:
            driver = workdir / f"driver_{abs(hash(variant.source))}.py"
            driver.write_text(CONSTANTS + variant.source + HARNESS, encoding="utf-8")
            cmd = [variant.python, str(driver), json.dumps(payload)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    finally:
        server.stop()
    if out.returncode != 0:
        raise SystemExit(f"{variant.name}: child failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def load() -> str:
    """The 1-minute load average, for the record (others share this machine)."""
    return f"{os.getloadavg()[0]:.2f}"


def report(rows: list[Variant], results: dict[str, list[dict[str, Any]]]) -> None:
    """The table: µs per turn, overhead over the matching floor, ratio of overheads vs nexus engine."""
    med = {name: statistics.median(r["us"] for r in runs) for name, runs in results.items()}
    cpu = {name: statistics.median(r["cpu_us"] for r in runs) for name, runs in results.items()}
    spread = {name: (min(r["us"] for r in runs), max(r["us"] for r in runs)) for name, runs in results.items()}
    overhead = {v.name: med[v.name] - med[v.floor] for v in rows if v.floor and v.name in med and v.floor in med}
    cpu_extra = {v.name: cpu[v.name] - cpu[v.floor] for v in rows if v.name in overhead and v.floor}
    nexus_turn = med.get("nexus engine (SSE)")
    nexus_extra = overhead.get("nexus engine (SSE)")
    head = f"{'µs/turn':>9}{'min-max':>13}{'CPU':>7}{'overhead':>10}{'CPU ovh':>9}{'turn/nexus':>12}{'ovh/nexus':>11}"
    print(f"\n{'row':<34}{head}")
    for v in rows:
        if v.name not in med:
            continue
        low, high = spread[v.name]
        line = f"{v.name:<34}{med[v.name]:>9.0f}{f'{low:.0f}-{high:.0f}':>13}{cpu[v.name]:>7.0f}"
        if v.name in overhead:
            line += f"{overhead[v.name]:>10.0f}{cpu_extra[v.name]:>9.0f}"
        else:
            line += f"{'(floor)':>10}{'':>9}"
        if nexus_turn:
            line += f"{med[v.name] / nexus_turn:>11.2f}x"
        if nexus_extra and v.name in overhead:
            line += f"{overhead[v.name] / nexus_extra:>10.2f}x"
        print(line)
    print(
        "\nµs per turn: median of the processes (min-max across them). CPU = the child's process_time per turn"
        "\n(the server's CPU is not in it). overhead = row minus its floor (same HTTP library, same wire mode),"
        "\nwall clock; CPU ovh = the same in CPU time. turn/nexus = row / nexus engine; ovh/nexus = overhead /"
        "\nnexus engine overhead."
    )
    versions: dict[str, str] = {}
    for runs in results.values():
        versions.update(runs[0]["versions"])
    print(
        "versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + f", python {sys.version.split()[0]}"
    )


def main() -> None:
    """Run every available row --reps times, interleaved, and print the table."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.path.insert(0, str(ROOT / "src"))
        child_main(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200, help="timed turns per process (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first (default 20)")
    parser.add_argument("--reps", type=int, default=3, help="processes per row; the median is shown (default 3)")
    parser.add_argument(
        "--only", default="", help="comma-separated name prefixes of the rows to run (their floors run too)"
    )
    parser.add_argument("--peers", action="store_true", help="also run pydantic-ai and openai-agents (if installed)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _machine

    print(_machine.header("bench_engine_http.py: engine overhead per turn over HTTP"))
    rows, notes = variants()
    if not args.peers:
        rows = [v for v in rows if v.python == NEXUS_PYTHON]
        notes = ["peers not measured, no ratios against them: add --peers (see bench/README.md)"]
    for note in notes:
        print("note:", note)
    wanted = [p.strip() for p in args.only.split(",") if p.strip()]
    picked = [v for v in rows if not wanted or any(v.name.startswith(p) for p in wanted)]
    needed = {v.name for v in picked} | {v.floor for v in picked if v.floor}  # a row needs its floor
    runnable = [v for v in rows if v.python and v.name in needed]
    print(
        f"One turn = 2 model calls + 1 tool call against the fake server; {args.warmup} warm-up + {args.turns} timed "
        f"turns per process, median of {args.reps} processes, rows interleaved. load average (1 min) at start: {load()}"
    )
    results: dict[str, list[dict[str, Any]]] = {v.name: [] for v in runnable}
    with tempfile.TemporaryDirectory(prefix="bench-engine-http-") as tmp:
        for rep in range(args.reps):
            for variant in runnable:
                results[variant.name].append(run_child(variant, args, Path(tmp)))
            print(f"  pass {rep + 1}/{args.reps} done, load average {load()}", flush=True)
    report(rows, results)
    print(_machine.load_line())


if __name__ == "__main__":
    main()
