#!/usr/bin/env python3
"""Streaming cost per token: ``nexus.llm.stream`` against the httpx floors (and the SDKs with ``--peers``).

A loopback server sends a pre-built SSE response of N small tokens in one write, so the
client is the bottleneck. Every variant runs in a fresh process: its HTTP client is built
once, one warm-up stream is not timed, then R streams are timed (µs per token each).
Rounds alternate the variants so load drift on a shared machine hits them alike; the
table gives the median over every timed stream of every round.

  floor_async  httpx.AsyncClient (built once), ``aiter_lines`` + ``json.loads`` of each data line
  floor_sync   httpx.Client (built once), ``iter_lines`` + ``json.loads``
  floor_async_scan  (reference, not a ratio base) the async floor calling the JSON C scanner
               directly, skipping ``json.loads``' Python wrapper as nexus does
  nexus        ``nexus.llm.stream`` events (a text_delta per token) and the final message

With ``--peers`` (nothing is installed; a peer that is not importable is reported and
gets no ratio) the same stream is also read by the official SDKs, each in the python of
the peer venv (default ``/tmp/peerbench/venv-stream/bin/python``, or ``--peer-python``):

  openai_sdk     ``openai.AsyncOpenAI`` ``chat.completions.create(stream=True)`` (OpenAI SSE)
  anthropic_sdk  ``anthropic.AsyncAnthropic`` ``messages.create(stream=True)`` (Anthropic SSE)

  .venv/bin/python bench/bench_stream.py [--tokens 20000] [--repeats 5] [--rounds 3] [--peers]
  .venv/bin/python bench/bench_stream.py --profile openai|anthropic   # cProfile of nexus, top functions
  .venv/bin/python bench/bench_stream.py --parts   # CPU cost of each stage (SSE, JSON, decoder), in process
  .venv/bin/python bench/bench_stream.py --also-src before=/tmp/before/src   # an older tree, same rounds

Also prints the import time of ``nexus.llm`` in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import _machine
from _stream_bodies import TOKEN, build_anthropic_body, build_body, serve
from _stream_parts import parts

PEER_PYTHON = "/tmp/peerbench/venv-stream/bin/python"


async def _floor_async(url: str, client: Any) -> int:
    count = 0
    payload = {"model": "bench-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with client.stream("POST", url + "/chat/completions", json=payload) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                count += _count(json.loads(line[6:]))
    return count


_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


async def _floor_async_scan(url: str, client: Any) -> int:
    """The async floor with json.loads' Python wrapper skipped, as nexus does (a reference row)."""
    count = 0
    payload = {"model": "bench-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with client.stream("POST", url + "/chat/completions", json=payload) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                count += _count(_scan_once(line, 6)[0])
    return count


def _floor_sync(url: str, client: Any) -> int:
    count = 0
    payload = {"model": "bench-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with client.stream("POST", url + "/chat/completions", json=payload) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                count += _count(json.loads(line[6:]))
    return count


def _count(chunk: dict[str, Any]) -> int:
    """1 if this parsed event carries a text token (either wire format), else 0."""
    if "choices" in chunk:
        return sum(1 for choice in chunk["choices"] if choice["delta"].get("content"))
    return 1 if chunk["type"] == "content_block_delta" and chunk["delta"].get("text") else 0


async def _nexus(url: str, _client: Any) -> int:
    from nexus.llm import Context, Model, StreamOptions, UserMessage, stream

    api = "anthropic-messages" if url.endswith("/anthropic") else "openai-completions"
    model = Model(id="bench-model", provider="openai", api=api, base_url=url)
    context = Context(messages=[UserMessage("hi")])
    count = 0
    async for event in stream(model, context, StreamOptions(api_key="bench", base_url=url)):
        if event.type == "text_delta":
            count += 1
        elif event.type == "error":
            raise RuntimeError(event.error.error_message)
        elif event.type == "done":
            assert len(event.message.text) == count * len(TOKEN)
    return count


async def _openai_sdk(url: str, client: Any) -> int:
    count = 0
    response = await client.chat.completions.create(
        model="bench-model", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for chunk in response:
        if chunk.choices and chunk.choices[0].delta.content:
            count += 1
    return count


async def _anthropic_sdk(url: str, client: Any) -> int:
    count = 0
    response = await client.messages.create(
        model="bench-model", max_tokens=100_000, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for event in response:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            count += 1
    return count


def _make_client(variant: str, url: str) -> Any:
    """The variant's client, built once per process (outside every timed stream)."""
    if variant in ("floor_async", "floor_async_scan"):
        import httpx

        return httpx.AsyncClient(timeout=60)
    if variant == "floor_sync":
        import httpx

        return httpx.Client(timeout=60)
    if variant == "openai_sdk":
        openai = importlib.import_module("openai")  # from the peer venv; not a dependency of nexus
        return openai.AsyncOpenAI(api_key="bench", base_url=url, max_retries=0)
    if variant == "anthropic_sdk":
        anthropic = importlib.import_module("anthropic")
        return anthropic.AsyncAnthropic(api_key="bench", base_url=url.removesuffix("/anthropic"), max_retries=0)
    return None  # nexus keeps its own shared client per event loop (built by the warm-up stream)


ASYNC_VARIANTS: dict[str, Callable[[str, Any], Awaitable[int]]] = {
    "floor_async": _floor_async,
    "floor_async_scan": _floor_async_scan,
    "nexus": _nexus,
    "openai_sdk": _openai_sdk,
    "anthropic_sdk": _anthropic_sdk,
}
PEER_VARIANTS = ("openai_sdk", "anthropic_sdk")
PEER_MODULE = {"openai_sdk": "openai", "anthropic_sdk": "anthropic"}


def _per_token(start: float, cpu: float, tokens: int) -> tuple[float, float]:
    """(wall, CPU) µs per token since ``start``/``cpu`` (perf_counter, process_time)."""
    return (time.perf_counter() - start) / tokens * 1e6, (time.process_time() - cpu) / tokens * 1e6


def child(variant: str, url: str, n: int, repeats: int) -> None:
    """Run one variant in this process and print its per-stream µs/token as JSON (warm-up excluded)."""
    client = _make_client(variant, url)
    if variant == "floor_sync":
        assert _floor_sync(url, client) == n  # warm-up and correctness check
        times = []
        for _ in range(repeats):
            start, cpu = time.perf_counter(), time.process_time()
            got = _floor_sync(url, client)
            times.append(_per_token(start, cpu, got))
        print(json.dumps(times))
        return
    fn = ASYNC_VARIANTS[variant]

    async def main() -> list[tuple[float, float]]:
        assert await fn(url, client) == n  # warm-up and correctness check
        times = []
        for _ in range(repeats):
            start, cpu = time.perf_counter(), time.process_time()
            got = await fn(url, client)
            times.append(_per_token(start, cpu, got))
        return times

    print(json.dumps(asyncio.run(main())))


def import_time_ms(python: str) -> tuple[float, float]:
    """Best-of-5 wall and CPU time of ``import nexus.llm`` minus a bare interpreter, in ms."""

    def best(code: str) -> tuple[float, float]:
        runs, cpus = [], []
        for _ in range(5):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([python, "-c", code], check=True)
            runs.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
        return min(runs), min(cpus)

    (wall, cpu), (bare_wall, bare_cpu) = best("import nexus.llm"), best("pass")
    return (wall - bare_wall) * 1000, (cpu - bare_cpu) * 1000


LABELS = {
    "floor_async": "floor: httpx async aiter_lines + json.loads",
    "floor_sync": "floor: httpx sync iter_lines + json.loads",
    "floor_async_scan": "reference: async floor, JSON C scanner called directly",
    "nexus": "nexus.llm.stream (events + final message)",
    "openai_sdk": "openai SDK AsyncOpenAI create(stream=True)",
    "anthropic_sdk": "anthropic SDK AsyncAnthropic create(stream=True)",
}


def peer_problem(python: str, variant: str) -> str | None:
    """Why a peer variant cannot run with ``python`` (None when it can); installs nothing."""
    if not os.path.exists(python):
        return f"not measured: {python} does not exist (see bench/README.md, 'Peers')"
    module = PEER_MODULE[variant]
    probe = subprocess.run([python, "-c", f"import {module}, httpx"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"not measured: `import {module}` fails in {python}"
    return None


def measure(
    variants: tuple[str, ...],
    url: str,
    n: int,
    repeats: int,
    rounds: int,
    peer_python: str,
    sources: dict[str, str] | None = None,
) -> dict[str, list[list[float]] | str]:
    """Each variant's [wall, CPU] µs/token per timed stream (or why it did not run); rounds rotate the order."""
    here = os.path.abspath(__file__)
    samples: dict[str, list[list[float]]] = {v: [] for v in variants}
    failed: dict[str, str] = {}
    for v in variants:
        if v in PEER_VARIANTS:
            problem = peer_problem(peer_python, v)
            if problem is not None:
                failed[v] = problem
    for r in range(rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for variant in order:
            if variant in failed:
                continue
            python = peer_python if variant in PEER_VARIANTS else sys.executable
            env = None
            if variant.startswith("nexus@") and sources is not None:  # another source tree of nexus
                env = {**os.environ, "PYTHONPATH": sources[variant.removeprefix("nexus@")]}
            name = "nexus" if variant.startswith("nexus@") else variant
            cmd = [python, here, "--child", name, url, str(n), str(repeats)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                failed[variant] = "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
                continue
            samples[variant].extend(json.loads(proc.stdout))
    return {v: failed[v] if v in failed else samples[v] for v in variants}


def print_table(title: str, results: dict[str, list[list[float]] | str]) -> None:
    """The table of one wire format: wall and CPU µs/token, each as a ratio to both floors."""
    wall = {v: statistics.median(x[0] for x in s) for v, s in results.items() if isinstance(s, list) and s}
    cpu = {v: statistics.median(x[1] for x in s) for v, s in results.items() if isinstance(s, list) and s}
    print(title)
    print("| variant | wall µs/token | min-max | x async floor | x sync floor | CPU µs/token | x async floor (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for variant, value in results.items():
        if isinstance(value, str) or variant not in wall:
            print(f"| {_label(variant)} | {value or 'no data'} | | | | | |")
            continue
        lo, hi = min(x[0] for x in value), max(x[0] for x in value)
        print(
            f"| {_label(variant)} | {wall[variant]:.2f} | {lo:.2f}-{hi:.2f} | {_ratio(wall, variant, 'floor_async')} | "
            f"{_ratio(wall, variant, 'floor_sync')} | {cpu[variant]:.2f} | {_ratio(cpu, variant, 'floor_async')} |"
        )
    sdk = next((v for v in PEER_VARIANTS if v in wall), None)
    if sdk is not None and "nexus" in wall:
        print(
            f"\n{LABELS[sdk]} / nexus, same run: {wall[sdk] / wall['nexus']:.1f}x wall, "
            f"{cpu[sdk] / cpu['nexus']:.1f}x CPU"
        )
    print()


def _label(variant: str) -> str:
    if variant.startswith("nexus@"):
        return f"nexus.llm.stream from {variant.removeprefix('nexus@')}"
    return LABELS[variant]


def _ratio(values: dict[str, float], variant: str, base: str) -> str:
    return f"{values[variant] / values[base]:.2f}x" if base in values else "-"


def profile(fmt: str, n: int) -> None:
    """cProfile of nexus reading one stream (after a warm-up): where the time per token goes."""
    import cProfile
    import pstats

    body = build_body(n) if fmt == "openai" else build_anthropic_body(n)
    url = f"http://127.0.0.1:{serve(body)}" + ("/v1" if fmt == "openai" else "/anthropic")

    async def main() -> None:
        await _nexus(url, None)
        prof = cProfile.Profile()
        prof.enable()
        await _nexus(url, None)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5, help="timed streams per process (after 1 warm-up)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per variant, order rotated")
    ap.add_argument("--peers", action="store_true", help="also measure the openai and anthropic SDKs (if importable)")
    ap.add_argument("--peer-python", default=os.environ.get("PEER_STREAM_PYTHON", PEER_PYTHON))
    ap.add_argument("--profile", choices=("openai", "anthropic"), help="cProfile nexus on one stream and exit")
    ap.add_argument("--no-import-time", action="store_true")
    ap.add_argument("--parts", action="store_true", help="CPU cost of each stage of nexus' read path, in process")
    ap.add_argument(
        "--also-src",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="also time nexus from another source tree (e.g. an older commit's src/), in the same rounds",
    )
    a = ap.parse_args()
    if a.profile:
        profile(a.profile, a.tokens)
        return
    if a.parts:
        print(_machine.header("bench_stream.py --parts: nexus' read path by stage"))
        parts(a.tokens)
        print(_machine.load_line())
        return
    print(_machine.header("bench_stream.py: client cost per streamed token"))
    n = a.tokens
    openai_url = f"http://127.0.0.1:{serve(build_body(n))}/v1"
    anthropic_url = f"http://127.0.0.1:{serve(build_anthropic_body(n))}/anthropic"
    what = f"{n} tokens of {TOKEN!r}, {a.rounds} fresh processes x {a.repeats} streams per variant (1 warm-up each)"
    sources = dict(item.split("=", 1) for item in a.also_src)
    base = ("floor_async", "floor_sync", "floor_async_scan", "nexus", *(f"nexus@{label}" for label in sources))
    for title, url, sdk in (
        (f"\n## OpenAI chat-completions SSE, {what}\n", openai_url, "openai_sdk"),
        (f"## Anthropic messages SSE, {what}\n", anthropic_url, "anthropic_sdk"),
    ):
        variants = (*base, sdk) if a.peers else base
        print_table(title, measure(variants, url, n, a.repeats, a.rounds, a.peer_python, sources))
    if not a.peers:
        print("(peers not measured: add --peers; see bench/README.md)\n")
    if not a.no_import_time:
        wall, cpu = import_time_ms(sys.executable)
        print(
            f"import nexus.llm (fresh interpreter, best of 5, minus bare python): {wall:.1f} ms wall, {cpu:.1f} ms CPU"
        )
    print(_machine.load_line())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
