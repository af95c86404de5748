"""Paced scripted streams share the loop's timers, listen for an abort once, and still stop at once on one.

With a thousand paced scripted streams at once, one loop timer and one abort listener per chunk made the
test double over half of the loop's work in the concurrency bench (``nexus.testing._pacing``).
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import Context, UserMessage
from nexus.testing import ScriptedModel, _pacing
from nexus.testing.steps import text

CONTEXT = Context(system_prompt="be brief", messages=[UserMessage("hello")])
WORDS = "sixty-four characters of text: four deltas of sixteen each here."


async def _events(model: ScriptedModel, signal: AbortSignal | None = None) -> list[AssistantMessageEvent]:
    return [e async for e in model.stream(model.model, CONTEXT, StreamOptions(signal=signal))]


async def test_the_paced_chunks_of_many_streams_share_a_few_loop_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    timers: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        timers.append(when)
        return call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting_call_at)  # call_later goes through it too
    models = [ScriptedModel([text(WORDS)], tokens_per_second=2000, record=False) for _ in range(200)]
    began = loop.time()
    streams = await asyncio.gather(*(_events(m, AbortSignal()) for m in models))
    span_s = loop.time() - began
    assert all(isinstance(events[-1], DoneEvent) and events[-1].message.text == WORDS for events in streams)
    # 800 paced deltas (4 per stream, 2 ms each); at most one timer per pacing tick the streams spanned
    assert len(timers) <= span_s / _pacing.TICK_S + 2, (len(timers), span_s)


async def test_a_paced_stream_listens_for_its_abort_once_and_stops_listening_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    added: list[Callable[[], None]] = []
    removed: list[Callable[[], None]] = []
    add_listener = AbortSignal.add_listener

    def counting_add(self: AbortSignal, listener: Callable[[], None]) -> Callable[[], None]:
        added.append(listener)
        remove = add_listener(self, listener)

        def counting_remove() -> None:
            removed.append(listener)
            remove()

        return counting_remove

    monkeypatch.setattr(AbortSignal, "add_listener", counting_add)
    model = ScriptedModel([text(WORDS)], tokens_per_second=4000)
    events = await _events(model, AbortSignal())
    assert [e.type for e in events].count("text_delta") == 4 and isinstance(events[-1], DoneEvent)
    assert len(added) == 1 and removed == added


async def test_an_abort_wakes_a_paced_stream_at_once_not_at_its_next_chunk() -> None:
    model = ScriptedModel([text(WORDS)], tokens_per_second=0.001)  # a chunk every hour and more
    signal = AbortSignal()
    seen: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in model.stream(model.model, CONTEXT, StreamOptions(signal=signal)):
            seen.append(event)
            if event.type == "text_delta":
                asyncio.get_running_loop().call_soon(signal.abort, "user pressed stop")

    await asyncio.wait_for(consume(), timeout=60)
    last = seen[-1]
    assert isinstance(last, ErrorEvent) and last.reason == "aborted" and last.error.error_message == "user pressed stop"
    assert [e.type for e in seen].count("text_delta") == 1


def test_a_loop_closed_with_a_paced_wait_pending_keeps_no_stream_alive() -> None:
    gone_loop, gone_model = _closed_mid_wait()
    gc.collect()
    assert gone_loop() is None and gone_model() is None


def _closed_mid_wait() -> tuple[weakref.ref[asyncio.AbstractEventLoop], weakref.ref[ScriptedModel]]:
    """A loop whose one paced stream was cancelled during its wait for the next chunk, then closed."""
    loop = asyncio.new_event_loop()
    model = ScriptedModel([text(WORDS)], tokens_per_second=0.001)
    first_delta = loop.create_future()

    async def consume() -> None:
        async for event in model.stream(model.model, CONTEXT, StreamOptions(signal=AbortSignal())):
            if event.type == "text_delta" and not first_delta.done():
                first_delta.set_result(None)

    task = loop.create_task(consume())
    loop.run_until_complete(first_delta)  # the stream went on to its wait in the same step
    assert _pacing.clock_of(loop).pending() == 1
    task.cancel()
    loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    loop.close()
    return weakref.ref(loop), weakref.ref(model)
