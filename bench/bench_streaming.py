#!/usr/bin/env python3
"""The streaming bridge: chunker cost per token, native-path throughput and latency, concurrent deliveries.

1. Chunker: 4-character tokens of a Markdown reply (paragraphs, sentences, code fences) pushed
   through ``BlockChunker(800, 1200)``; time per token event and per character at 1 KB, 100 KB
   and 1 MB (linear means the per-token cost stays flat). Target: <= 1 us per token event.
2. Native path, throughput: one delivery of N token events through the router to a no-op
   ``stream`` adapter process (bench/adapters/noop_stream.py), timed from the first event to
   ``delivery_complete``. Target: >= 100,000 StreamEvents/s.
3. Native path, latency: tokens paced like a busy model (a yield to the event loop between
   tokens, a 0.2 ms pause every 10), each carrying ``monotonic_ns()`` when the router gets it;
   the adapter records when it reads the line. Target: p99 < 2 ms.
4. 100 concurrent deliveries to 10 accounts: wall time, and the adapter's framing check (every
   token inside its own stream_start...stream_end; no delivery interleaved).

Usage: PYTHONPATH=src .venv/bin/python bench/bench_streaming.py [N_EVENTS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import _machine

from nexus.adapters.manager import AdapterManager
from nexus.adapters.types import DeliveryTarget
from nexus.config import AdapterConfig
from nexus.streaming.chunker import BlockChunker
from nexus.streaming.events import StreamEnd, StreamEvent, Token
from nexus.streaming.router import StreamRouter

NOOP = Path(__file__).parent / "adapters" / "noop_stream.py"


def reply_text(size: int) -> str:
    paragraph = (
        "The router reads the adapter's info once and keeps one stream process per account. "
        "Tokens arrive as fast as the model writes them! Does the chunker keep up? It should.\n\n"
    )
    code = "```python\n" + "".join(f"value_{i} = compute({i})\n" for i in range(12)) + "```\n\n"
    unit = paragraph * 3 + code
    return (unit * (size // len(unit) + 1))[:size]


def bench_chunker(total: int = 2_000_000) -> list[tuple[int, float, float, int]]:
    """Per reply size: enough replies to push ``total`` characters (a fresh chunker per reply), best of 3."""
    rows = []
    for size in (1_000, 100_000, 1_000_000):
        text = reply_text(size)
        tokens = [text[i : i + 4] for i in range(0, len(text), 4)]
        replies = max(1, total // size)
        best = float("inf")
        blocks = 0
        for _ in range(3):
            start = time.perf_counter()
            count = 0
            for _ in range(replies):
                chunker = BlockChunker(800, 1200)
                push = chunker.push
                for token in tokens:
                    count += len(push(token))
                count += len(chunker.flush())
            best = min(best, time.perf_counter() - start)
            blocks = count // replies
        rows.append((size, best / (len(tokens) * replies) * 1e6, best / (size * replies) * 1e9, blocks))
    return rows


def manager_for(tmp: Path, accounts: int) -> AdapterManager:
    config = AdapterConfig.model_validate(
        {
            "command": f"{sys.executable} {NOOP}",
            "accounts": {f"a{n}": {"config": {"stats": str(tmp / f"stats{n}.jsonl")}} for n in range(accounts)},
        }
    )
    return AdapterManager({"noop": config}, state_dir=tmp / "state")


def read_stats(tmp: Path, accounts: int) -> list[dict[str, object]]:
    rows = []
    for n in range(accounts):
        path = tmp / f"stats{n}.jsonl"
        if path.exists():
            rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


async def plain_tokens(n: int) -> AsyncIterator[StreamEvent]:
    token = Token("tok ")
    for _ in range(n):
        yield token
    yield StreamEnd("bench", final=True)


async def paced_tokens(n: int) -> AsyncIterator[StreamEvent]:
    for i in range(n):
        yield Token(str(time.monotonic_ns()))
        await (asyncio.sleep(0.0002) if i % 10 == 9 else asyncio.sleep(0))
    yield StreamEnd("bench", final=True)


def record_pipe_latency(into: list[int]) -> None:
    """Wrap ``StreamDelivery.write`` to record, per token line, the time from the router getting it to the pipe."""
    from nexus.adapters import stream_client

    original = stream_client.StreamDelivery.write

    def write(self: stream_client.StreamDelivery, data: bytes) -> bool:
        ok = original(self, data)
        now = time.monotonic_ns()
        for line in data.splitlines():
            text = line[24:-2]
            if line.startswith(b'{"type":"token"') and text.isdigit():
                into.append(now - int(text))
        return ok

    stream_client.StreamDelivery.write = write  # type: ignore[method-assign]


async def bench_native(n: int) -> tuple[float, list[int]]:
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        manager = manager_for(tmp, 1)
        router = StreamRouter(manager)
        target = DeliveryTarget("noop", "a0", "bench")
        await router.deliver(target, plain_tokens(100))  # warm-up: spawn the process
        start = time.perf_counter()
        report = await router.deliver(target, plain_tokens(n))
        elapsed = time.perf_counter() - start
        assert report.ok, report
        await router.deliver(target, paced_tokens(20_000))
        await manager.close()
        stats = read_stats(tmp, 1)
    latencies = [lat for row in stats for lat in row["latencies_ns"]]  # type: ignore[attr-defined]
    return (n + 2) / elapsed, latencies


async def bench_concurrent(deliveries: int = 100, accounts: int = 10, tokens: int = 200) -> tuple[float, int, int]:
    async def run(i: int) -> AsyncIterator[StreamEvent]:
        for _ in range(tokens):
            yield Token(f"r{i} ")
            await asyncio.sleep(0)
        yield StreamEnd(f"r{i}", final=True)

    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        manager = manager_for(tmp, accounts)
        router = StreamRouter(manager)
        start = time.perf_counter()
        reports = await asyncio.gather(
            *(router.deliver(DeliveryTarget("noop", f"a{i % accounts}", f"u{i}"), run(i)) for i in range(deliveries))
        )
        elapsed = time.perf_counter() - start
        await manager.close()
        stats = read_stats(tmp, accounts)
    assert all(r.ok for r in reports)
    violations = sum(int(row["violations"]) for row in stats)  # type: ignore[call-overload]
    return elapsed, len(stats), violations


def percentiles(values: list[int]) -> str:
    if not values:
        return "no samples"
    values = sorted(values)
    p50 = statistics.median(values) / 1e6
    p99 = values[max(0, int(len(values) * 0.99) - 1)] / 1e6
    return f"p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {values[-1] / 1e6:.3f} ms over {len(values):,} tokens"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events", nargs="?", type=int, default=200_000, help="token events of part 2 (200,000)")
    n = parser.parse_args().events
    print(_machine.header("bench_streaming.py: the streaming bridge"))
    print("1. chunker (4-char tokens, min 800 / max 1200)")
    print(f"   {'reply':>9}  {'us/token':>9}  {'ns/char':>8}  {'blocks':>7}")
    for size, per_token, per_char, blocks in bench_chunker():
        print(f"   {size:>9,}  {per_token:>9.3f}  {per_char:>8.1f}  {blocks:>7}")
    print("   target <= 1 us per token event, flat across sizes (linear)")

    pipe: list[int] = []
    record_pipe_latency(pipe)
    rate, latencies = asyncio.run(bench_native(n))
    print(
        f"2. native path throughput: {rate:,.0f} StreamEvents/s over {n:,} events "
        f"(target >= 100,000; x{rate / 100_000:.2f})"
    )
    for label, values in (("router -> adapter's stdin pipe", pipe), ("router -> read by the adapter", latencies)):
        print(f"3. token {label}: {percentiles(values)} (target p99 < 2 ms)")
    elapsed, delivered, violations = asyncio.run(bench_concurrent())
    print(
        f"4. 100 concurrent deliveries x 200 tokens to 10 accounts: {elapsed:.2f} s, "
        f"{delivered} deliveries seen by the adapters, {violations} framing violations"
    )
    print(_machine.load_line())


if __name__ == "__main__":
    main()
