"""What a paced scripted stream holds while it waits between chunks: the concurrency benchmark keeps a thousand
of them in flight at once, so the test double's own memory is multiplied by a thousand beside the engine's."""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from typing import Any

from nexus.llm.abort import AbortSignal
from nexus.llm.options import StreamOptions
from nexus.llm.types import Context, UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call

STREAMS = 100

ANSWER = "a long answer, streamed sixteen characters at a time; " * 40
"""2,160 characters: 135 deltas, so a stream that held its pieces up front would hold all 135."""

PER_STREAM_BYTES = 3_300
"""The bound on what one paced stream holds while it waits for its next chunk, its consumer's task included.
Measured here: 3.1 KB, of which ~2 KB the consumer's task and the loop's handles; 3.3 KB while the stream was an
async generator (a frame of its own and an entry in the event loop's set of them); 15.5 KB while the answer's
pieces were cut up front and held in a list, the stream was a chain of five generators (the stream, its player,
a start wrapper, the events, a tool-call id generator), each wait a coroutine awaiting one more, and the
history's sizes were kept as one pair per message."""


async def _consume(model: ScriptedModel, context: Context, signal: AbortSignal, deltas: list[int]) -> None:
    async for event in model.stream(model.model, context, StreamOptions(signal=signal)):
        if event.type == "text_delta":
            deltas.append(1)


async def test_a_paced_stream_holds_one_frame_and_no_list_of_its_pieces_while_it_waits() -> None:
    models = [ScriptedModel([text(ANSWER)], tokens_per_second=0.01, record=False) for _ in range(STREAMS)]
    contexts = [Context(system_prompt="be brief", messages=[UserMessage(f"question {i}")]) for i in range(STREAMS)]
    signals = [AbortSignal() for _ in range(STREAMS)]
    deltas: list[int] = []
    warm = ScriptedModel([tool_call("ls", {}), text("ok")], record=False)  # one-time imports and caches
    for _ in range(2):
        _ = [e async for e in warm.stream(warm.model, contexts[0])]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        streams = zip(models, contexts, signals, strict=True)
        tasks = [asyncio.ensure_future(_consume(m, c, s, deltas)) for m, c, s in streams]
        for _ in range(1000):  # every stream has sent its first delta and waits ~400 s for its second
            if len(deltas) == STREAMS:
                break
            await asyncio.sleep(0.005)
        gc.collect()
        per_stream = (tracemalloc.get_traced_memory()[0] - before) / STREAMS
    finally:
        tracemalloc.stop()
    for signal in signals:
        signal.abort("the test is over")
    await asyncio.gather(*tasks)
    assert len(deltas) == STREAMS
    assert per_stream < PER_STREAM_BYTES, f"{per_stream:.0f} bytes a stream"


async def test_a_stream_is_no_async_generator_and_keeps_its_events_and_their_order() -> None:
    # the event loop keeps every async generator started in a set of weak references (asyncio's finalizer
    # hook), and each holds a frame of its own: a stream is a plain async iterator instead
    started: list[object] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()

    def count(agen: Any) -> None:
        started.append(agen)
        if firstiter is not None:
            firstiter(agen)

    model = ScriptedModel([tool_call("ls", {"path": "."}, id="c1"), text("two files")], chunk_chars=4, record=False)
    context = Context(system_prompt="be brief", messages=[UserMessage("list the files")])
    sys.set_asyncgen_hooks(firstiter=count, finalizer=finalizer)
    try:
        first = [event.type async for event in model.stream(model.model, context)]
        second = [event.type async for event in model.stream(model.model, context)]
        third = [event async for event in model.stream(model.model, context)]
    finally:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
    assert started == []
    assert first == ["start", "toolcall_start", *["toolcall_delta"] * 3, "toolcall_end", "done"]
    assert second == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert [e.type for e in third] == ["error"] and third[0].error.error_message is not None


async def test_a_stream_taken_but_never_read_takes_no_step_and_a_closed_one_ends() -> None:
    model = ScriptedModel([text("one"), text("two")], record=False)
    context = Context(system_prompt="be brief", messages=[UserMessage("hi")])
    unread = model.stream(model.model, context)
    assert model.pending == 2  # the step is taken when the first event is asked for, as before
    closed = model.stream(model.model, context)
    assert (await anext(closed)).type == "start"
    await closed.aclose()  # type: ignore[attr-defined]
    assert [event async for event in closed] == []
    assert [event.type async for event in unread][-1] == "done" and model.pending == 0
