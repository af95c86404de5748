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
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import _machine

TOKEN = "tok "
PEER_PYTHON = "/tmp/peerbench/venv-stream/bin/python"


def build_body(n: int) -> bytes:
    """The whole SSE body: role chunk, n content chunks, finish chunk, usage chunk, [DONE]."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model"}

    def event(choices: list[object], **extra: object) -> bytes:
        return b"data: " + json.dumps({**head, "choices": choices, **extra}).encode() + b"\n\n"

    parts = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    token = event([{"index": 0, "delta": {"content": TOKEN}, "finish_reason": None}])
    parts.extend([token] * n)
    parts.append(event([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
    parts.append(event([], usage=usage))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def build_anthropic_body(n: int) -> bytes:
    """The same response in Anthropic Messages SSE (message_start … content_block_delta x n … message_stop)."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "content": [], "model": "bench-model"}
    parts = [event("message_start", {"type": "message_start", "message": {**message, "usage": usage}})]
    block = {"type": "text", "text": ""}
    parts.append(event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TOKEN}}
    parts.extend([event("content_block_delta", delta)] * n)
    parts.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}
    parts.append(event("message_delta", stop))
    parts.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def serve(body: bytes) -> int:
    """Start a loopback server answering every request with ``body`` in one sendall; return its port."""
    blob = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def answer(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                more = conn.recv(65536)
                if not more:
                    break
                rest += more
            conn.sendall(blob)
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(5)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return int(srv.getsockname()[1])


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


def parts(n: int, reps: int = 9) -> None:
    """CPU µs per token of each stage of nexus' read path, in process (no HTTP): where the time goes."""
    from nexus.llm._sse import SSEParser, _parse_block, parse_data
    from nexus.llm.events import TextDeltaEvent
    from nexus.llm.providers import anthropic, openai_completions
    from nexus.llm.providers._common import _decode
    from nexus.llm.types import AssistantMessage, Model

    def per_token(fn: Callable[[], object]) -> float:
        runs = []
        for _ in range(reps):
            start = time.process_time()
            fn()
            runs.append((time.process_time() - start) / n * 1e6)
        return statistics.median(runs)

    print(f"| stage (CPU µs per token, median of {reps}, {n} tokens, in process) | OpenAI | Anthropic |")
    print("|---|---|---|")
    rows: dict[str, list[float]] = {}
    for body, module in ((build_body(n), openai_completions), (build_anthropic_body(n), anthropic)):
        chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
        events: list[tuple[str | None, str]] = []
        parser = SSEParser()
        for chunk in chunks:
            events.extend(parser.feed(chunk))
        payloads = [data for _, data in events if data != "[DONE]"]
        model = Model(id="bench-model", provider="openai", api="bench")

        def sse(chunks: list[bytes] = chunks) -> None:
            p = SSEParser()
            for chunk in chunks:
                p.feed(chunk)

        def general(chunks: list[bytes] = chunks) -> None:
            text = b"".join(chunks).decode("utf-8", "replace")
            for block in text.split("\n\n"):
                if block:
                    _parse_block(block)

        def decode(module: Any = module, model: Model = model, events: list[tuple[str | None, str]] = events) -> None:
            decoder = module._SPEC.decoder(model, AssistantMessage(api="bench", provider="openai", model="m"))
            for name, data in events:
                _decode(decoder, name, data)

        def loads(payloads: list[str] = payloads) -> None:
            for data in payloads:
                json.loads(data)

        def scan(payloads: list[str] = payloads) -> None:
            for data in payloads:
                parse_data(data)

        message = AssistantMessage(api="bench", provider="openai", model="m")

        def events_only(message: AssistantMessage = message) -> None:
            for _ in range(n):
                TextDeltaEvent(0, TOKEN, message)

        stages: dict[str, Callable[[], None]] = {
            "SSE framing: `SSEParser.feed`, 64 KB chunks": sse,
            "the same with the general block parser on every block (no fast path)": general,
            "`json.loads` of every data payload": loads,
            "`parse_data` (C scanner) of every data payload": scan,
            "decoder: `handle` per event (parse_data, events, append)": decode,
            "one `TextDeltaEvent` per token": events_only,
        }
        for label, fn in stages.items():
            rows.setdefault(label, []).append(per_token(fn))
    for label, (o, a) in rows.items():
        print(f"| {label} | {o:.2f} | {a:.2f} |")


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
