"""``bench_stream.py --parts``: the CPU cost of each stage of nexus' read path, in process (no HTTP).

The response bodies are the ones the main benchmark streams (``_stream_bodies``), so a stage's cost per
token adds up to the per-token cost the loopback rows show, minus the socket.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from _stream_bodies import TOKEN, build_anthropic_body, build_body


def parts(n: int, reps: int = 9) -> None:
    """CPU µs per token of each stage of nexus' read path, in process (no HTTP): where the time goes."""
    from nexus.llm.providers import anthropic, openai_completions

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
        for label, fn in stages(body, module, n).items():
            rows.setdefault(label, []).append(per_token(fn))
    for label, (o, a) in rows.items():
        print(f"| {label} | {o:.2f} | {a:.2f} |")


def stages(body: bytes, module: Any, n: int) -> dict[str, Callable[[], None]]:
    """Each stage of the read path over one whole response ``body`` of ``n`` tokens, as a callable to time."""
    from nexus.llm._sse import SSEParser, _parse_block, parse_data
    from nexus.llm.events import TextDeltaEvent
    from nexus.llm.providers._common import _decode
    from nexus.llm.types import AssistantMessage, Model

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

    return {
        "SSE framing: `SSEParser.feed`, 64 KB chunks": sse,
        "the same with the general block parser on every block (no fast path)": general,
        "`json.loads` of every data payload": loads,
        "`parse_data` (C scanner) of every data payload": scan,
        "decoder: `handle` per event (parse_data, events, append)": decode,
        "one `TextDeltaEvent` per token": events_only,
    }
