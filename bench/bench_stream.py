#!/usr/bin/env python3
"""Streaming cost per token: ``nexus.llm.stream`` vs the httpx floor vs the official openai SDK.

A loopback server sends a pre-built OpenAI chat-completions SSE response of N small
tokens in one write, so the client is the bottleneck. Variants, each in a fresh process
(1 warm-up stream, then R timed streams, median reported):

  floor   httpx.AsyncClient, aiter_lines + json.loads of each data line, text pulled out
  nexus   nexus.llm.stream(...) events (text_delta per token, final message assembled)
  openai  openai.AsyncOpenAI chat.completions.create(stream=True), run with the python of a
          separate venv (default /tmp/bench-openai, or $OPENAI_BENCH_PYTHON); skipped if absent

The same is then done for Anthropic messages SSE (floor and nexus only).

Usage: .venv/bin/python bench/bench_stream.py [N_TOKENS] [REPEATS]
Also prints the import time of ``nexus.llm`` in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

TOKEN = "tok "


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

    def event(name: str, data: dict[str, object]) -> bytes:
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


async def run_floor(url: str) -> int:
    import httpx

    count = 0
    async with httpx.AsyncClient() as client:
        payload = {"model": "bench-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        async with client.stream("POST", url + "/chat/completions", json=payload) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[6:])
                    if "choices" in chunk:
                        for choice in chunk["choices"]:
                            if choice["delta"].get("content"):
                                count += 1
                    elif chunk["type"] == "content_block_delta" and chunk["delta"].get("text"):
                        count += 1
    return count


async def run_nexus(url: str) -> int:
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


async def run_openai(url: str) -> int:
    import openai

    client = openai.AsyncOpenAI(api_key="bench", base_url=url)
    count = 0
    response = await client.chat.completions.create(
        model="bench-model", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for chunk in response:
        if chunk.choices and chunk.choices[0].delta.content:
            count += 1
    await client.close()
    return count


VARIANTS = {"floor": run_floor, "nexus": run_nexus, "openai": run_openai}


def child(variant: str, url: str, n: int, repeats: int) -> None:
    """Run one variant in this process and print its per-stream µs/token as JSON."""
    fn = VARIANTS[variant]

    async def main() -> list[float]:
        assert await fn(url) == n  # warm-up and correctness check
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            got = await fn(url)
            times.append((time.perf_counter() - start) / got * 1e6)
        return times

    print(json.dumps(asyncio.run(main())))


def import_time_ms(python: str) -> float:
    """Best-of-5 wall time of ``import nexus.llm`` minus a bare interpreter, in ms."""

    def best(code: str) -> float:
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run([python, "-c", code], check=True)
            runs.append(time.perf_counter() - start)
        return min(runs)

    return (best("import nexus.llm") - best("pass")) * 1000


LABELS = {
    "floor": "floor: httpx async aiter_lines + json.loads",
    "nexus": "nexus.llm.stream (events + final message)",
    "openai": "openai SDK AsyncOpenAI create(stream=True)",
}


def measure(variants: tuple[str, ...], url: str, n: int, repeats: int, rounds: int = 2) -> dict[str, float | str]:
    """Median µs/token of each variant (or why it did not run).

    Each round runs every variant once in a fresh process; rounds alternate the variants
    so that load drift on a shared machine hits them alike.
    """
    here = os.path.abspath(__file__)
    sdk_python = os.environ.get("OPENAI_BENCH_PYTHON", "/tmp/bench-openai/bin/python")
    samples: dict[str, list[float]] = {v: [] for v in variants}
    failed: dict[str, str] = {}
    for _ in range(rounds):
        for variant in variants:
            python = sdk_python if variant == "openai" else sys.executable
            if variant == "openai" and not os.path.exists(python):
                failed[variant] = f"skipped: no {python} (python -m venv /tmp/bench-openai && pip install openai)"
                continue
            cmd = [python, here, "--child", variant, url, str(n), str(repeats)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                failed[variant] = "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
                continue
            samples[variant].extend(json.loads(proc.stdout))
    return {v: failed[v] if v in failed else statistics.median(samples[v]) for v in variants}


def print_table(title: str, results: dict[str, float | str]) -> None:
    floor = results["floor"]
    print(title)
    print(f"{'variant':<44} {'us/token':>9} {'x floor':>8}")
    for variant, value in results.items():
        if isinstance(value, float) and isinstance(floor, float):
            print(f"{LABELS[variant]:<44} {value:>9.2f} {value / floor:>7.2f}x")
        else:
            print(f"{LABELS[variant]:<44} {value}")
    print()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    openai_url = f"http://127.0.0.1:{serve(build_body(n))}/v1"
    anthropic_url = f"http://127.0.0.1:{serve(build_anthropic_body(n))}/anthropic"
    what = f"{n} tokens of {TOKEN!r}, median of 2 fresh processes x {repeats} streams (after 1 warm-up each)"
    print_table(f"OpenAI chat-completions SSE, {what}", measure(("floor", "nexus", "openai"), openai_url, n, repeats))
    print_table(f"Anthropic messages SSE, {what}", measure(("floor", "nexus"), anthropic_url, n, repeats))
    ms = import_time_ms(sys.executable)
    print(f"import nexus.llm (fresh interpreter, best of 5, minus bare python): {ms:.1f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
