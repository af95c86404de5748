"""The block pipeline: flush rules, human delay between blocks only, tool status, reasoning (injected clock)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

from nexus.adapters.types import DeliveryError, DeliveryResult
from nexus.streaming.chunker import BlockChunker
from nexus.streaming.events import Reasoning, StreamEnd, StreamError, StreamEvent, Token, ToolStatus
from nexus.streaming.pipeline import BlockPipeline
from nexus.streaming.settings import BlockSettings, block_settings
from nexus.testing import ManualClock


class Sink:
    """Records every block sent and the clock time it was sent at."""

    def __init__(self, clock: ManualClock, fail_at: int | None = None) -> None:
        self.clock = clock
        self.sent: list[tuple[float, str]] = []
        self.fail_at = fail_at

    async def __call__(self, text: str, index: int) -> DeliveryResult:
        if index == self.fail_at:
            return DeliveryResult(False, error=DeliveryError("network", "platform down"))
        self.sent.append((self.clock.now(), text))
        return DeliveryResult(True, [f"m{index}"], 1)

    @property
    def texts(self) -> list[str]:
        return [text for _, text in self.sent]


class Source:
    """An event source the test feeds by hand (like a live run)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()

    def put(self, *events: StreamEvent) -> None:
        for event in events:
            self.queue.put_nowait(event)

    def close(self) -> None:
        self.queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        while (event := await self.queue.get()) is not None:
            yield event


def quiet(**changes: object) -> BlockSettings:
    base = {"min_chars": 20, "max_chars": 60, "idle_ms": 1000, "human_delay_ms": None}
    return BlockSettings(**{**base, **changes})  # type: ignore[arg-type]


async def test_human_delay_only_between_blocks() -> None:
    clock = ManualClock()
    sink = Sink(clock)
    pipeline = BlockPipeline(quiet(human_delay_ms=(800, 2500)), sink, clock=clock, rng=random.Random(7))
    source = Source()
    text = "First paragraph is here.\n\nSecond paragraph is here.\n\nThird one closes it."
    source.put(*[Token(text[i : i + 4]) for i in range(0, len(text), 4)], StreamEnd("r"))
    source.close()
    task = asyncio.create_task(pipeline.run(source))
    await clock.settle()
    assert sink.texts == ["First paragraph is here."], "the first block goes out at once"
    while not task.done():
        await clock.wait_for_sleeper()
        await clock.advance(3.0)
    report = await task
    assert sink.texts == ["First paragraph is here.", "Second paragraph is here.", "Third one closes it."]
    assert len(report.delays) == 2 and all(0.8 <= d <= 2.5 for d in report.delays)
    gaps = [b[0] - a[0] for a, b in zip(sink.sent, sink.sent[1:], strict=False)]
    assert gaps == report.delays


async def test_idle_flush_sends_what_is_buffered() -> None:
    clock = ManualClock()
    sink = Sink(clock)
    source = Source()
    task = asyncio.create_task(BlockPipeline(quiet(), sink, clock=clock).run(source))
    source.put(Token("Short "), Token("start"))
    await clock.settle()
    await clock.advance(0.9)
    assert sink.texts == [], "not idle yet"
    await clock.advance(0.2)
    assert sink.texts == ["Short start"]
    source.put(Token(" and more."), StreamEnd("r"))
    source.close()
    await task
    assert sink.texts == ["Short start", "and more."]


async def test_tool_status_inline_or_off() -> None:
    events: list[StreamEvent] = [
        Token("Let me look."),
        ToolStatus("read", "t1", "started", "Reading package.json"),
        ToolStatus("read", "t1", "completed", "Read package.json"),
        ToolStatus("bash", "t2", "started", "Running `pytest -q`"),
        ToolStatus("bash", "t2", "failed", "Ran `pytest -q` (exit 1) (failed)"),
        StreamEnd("r", final=False),
        Token("Done."),
        StreamEnd("r"),
    ]
    for mode, expected in (
        (
            "inline",
            [
                "Let me look.",
                "[Reading package.json...]",
                "[Running `pytest -q`...]",
                "[Ran `pytest -q` (exit 1) (failed)]",
                "Done.",
            ],
        ),
        ("off", ["Let me look.", "Done."]),
    ):
        clock = ManualClock()
        sink = Sink(clock)
        source = Source()
        source.put(*events)
        source.close()
        await BlockPipeline(quiet(tool_status=mode), sink, clock=clock).run(source)
        assert sink.texts == expected, mode


async def test_reasoning_only_when_the_channel_asks() -> None:
    for wanted in (False, True):
        clock = ManualClock()
        sink = Sink(clock)
        source = Source()
        source.put(Reasoning("think "), Reasoning("hard"), Token("Answer."), StreamEnd("r"))
        source.close()
        await BlockPipeline(quiet(reasoning=wanted), sink, clock=clock).run(source)
        assert sink.texts == (["> think hard", "Answer."] if wanted else ["Answer."])


async def test_a_failed_send_stops_delivery_but_the_source_is_consumed() -> None:
    clock = ManualClock()
    sink = Sink(clock, fail_at=1)
    source = Source()
    source.put(*[Token(f"Paragraph number {i}.\n\n") for i in range(5)], StreamError("boom", True))
    source.close()
    report = await BlockPipeline(quiet(min_chars=10), sink, clock=clock).run(source)
    assert report.error == "platform down" and report.blocks_sent == 1
    assert sink.texts == ["Paragraph number 0."]
    assert source.queue.qsize() == 1, "everything up to the terminal event was consumed"


def test_paragraph_is_preferred_then_newline_then_sentence_then_space() -> None:
    def first_block(text: str, lo: int = 10, hi: int = 40) -> str:
        chunker = BlockChunker(lo, hi)
        return chunker.push(text)[0].text

    assert first_block("aaaa aaaa aaaa. bbbb\nbbbb\n\ncccc cccc cccc cccc dd") == "aaaa aaaa aaaa. bbbb\nbbbb\n\n"
    assert first_block("aaaa aaaa aaaa. bbbb\nbbbb cccc cccc cccc cccc dd") == "aaaa aaaa aaaa. bbbb\n"
    assert first_block("aaaa aaaa aaaa. bbbb bbbb cccc cccc cccc cccc dd") == "aaaa aaaa aaaa. "
    assert first_block("aaaa aaaa aaaa bbbb bbbb cccc cccc cccc cccc dd") == "aaaa aaaa aaaa bbbb bbbb cccc cccc cccc "
    assert first_block("a" * 50) == "a" * 40


def test_a_code_fence_split_is_closed_and_reopened_with_its_opening_line() -> None:
    chunker = BlockChunker(10, 60)
    body = "".join(f"line {i}\n" for i in range(20))
    blocks = chunker.push("```python\n" + body + "```\n") + chunker.flush()
    assert len(blocks) > 2
    assert blocks[0].text.endswith("\n```") and blocks[0].closer == "```"
    assert all(b.text.startswith("```python\n") for b in blocks[1:])
    assert "".join(b.original for b in blocks) == "```python\n" + body + "```\n"


def test_channel_defaults_and_limits() -> None:
    assert block_settings("sms") == BlockSettings(min_chars=140, max_chars=160, human_delay_ms=(500, 1500))
    assert block_settings("imessage").human_delay_ms == (1000, 3000)
    assert block_settings("discord", {"max_chars": 5000}).max_chars == 2000, "clamped to the text limit"
    assert block_settings("custom", {"min_chars": 900, "max_chars": 500}).min_chars == 500
    assert block_settings("whatsapp", {"human_delay_ms": [0, 0]}).human_delay_ms == (0, 0)
