"""The block pipeline: StreamEvents of one delivery in, ``send`` calls out (seed 004 path 2).

Tokens go through the :class:`~nexus.streaming.chunker.BlockChunker`; what is buffered is
flushed when the model pauses for ``idle_ms`` (thinking, a tool running), when a model call
ends (``stream_end``) and at the end of the delivery. Tool status is written inline
(``[Reading package.json...]``) or dropped per channel; reasoning only where asked for.
Blocks are sent in order by one sender task, with a random human delay *between* blocks
(never before the first) drawn from the settings; every wait is on the injected clock.

The pipeline keeps consuming events after a send fails (the run must never stall on a
delivery), but sends nothing more: a gap in the middle of a reply is worse than a cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field

from nexus.adapters import Clock, DeliveryResult, MonotonicClock
from nexus.streaming.chunker import Block, BlockChunker
from nexus.streaming.events import (
    Reasoning,
    StreamEnd,
    StreamError,
    StreamEvent,
    Token,
    ToolStatus,
    is_terminal,
)
from nexus.streaming.settings import BlockSettings

SendBlock = Callable[[str, int], Awaitable[DeliveryResult]]
"""``send(text, index)``: deliver one block (index 0 is the first); returns the adapter's result."""


@dataclass(slots=True)
class PipelineReport:
    """What a block delivery did: blocks sent, message ids, and the error that stopped it, if any."""

    blocks_sent: int = 0
    message_ids: list[str] = field(default_factory=list)
    error: str | None = None
    stream_error: str | None = None
    delays: list[float] = field(default_factory=list)
    attempts: int = 0
    """``send`` calls made, retries included (an adapter's ``retry_after_ms`` answer counts)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def clean_block(text: str) -> str:
    """A block as sent: whitespace at either end removed ('' when nothing is left).

    Blocks are cut between words and paragraphs, so their edges are separators, not content.
    """
    return text.strip()


class BlockPipeline:
    """One delivery through the block path; ``await pipeline.run(events)`` returns its report."""

    def __init__(
        self,
        settings: BlockSettings,
        send: SendBlock,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings
        self._send = send
        self._clock = clock or MonotonicClock()
        self._rng = rng or random.Random()
        self._chunker = BlockChunker(settings.min_chars, settings.max_chars)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._last_event = 0.0
        self._wake = asyncio.Event()
        self._reasoning: list[str] = []
        self.report = PipelineReport()

    async def run(self, events: AsyncIterable[StreamEvent]) -> PipelineReport:
        """Consume ``events`` to the end of the delivery and send its blocks; never raises for a send error."""
        sender = asyncio.create_task(self._sender(), name="nexus-blocks-sender")
        idle = asyncio.create_task(self._idle(), name="nexus-blocks-idle")
        try:
            async for event in events:
                self._last_event = self._clock.now()
                self._handle(event)
                if is_terminal(event):
                    break
        finally:
            self._flush()
            self._queue.put_nowait(None)
            idle.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await idle
            await sender
        return self.report

    def _handle(self, event: StreamEvent) -> None:
        kind = type(event)
        if kind is Token:
            if self._reasoning:
                self._flush_reasoning()
            self._enqueue_all(self._chunker.push(event.text))  # type: ignore[union-attr]
            if self._chunker.buffered:
                self._wake.set()
        elif kind is Reasoning:
            if self._settings.reasoning:
                self._reasoning.append(event.text)  # type: ignore[union-attr]
        elif kind is ToolStatus:
            self._tool_status(event)  # type: ignore[arg-type]
        elif kind is StreamEnd:
            self._flush()
        elif kind is StreamError:
            self.report.stream_error = event.error  # type: ignore[union-attr]
            self._flush()

    def _tool_status(self, event: ToolStatus) -> None:
        if self._settings.tool_status == "off" or event.status == "completed":
            return
        label = event.summary or event.tool_name
        line = f"[{label}...]" if event.status == "started" else f"[{label}]"
        self._flush()
        self._queue.put_nowait(line)

    def _flush_reasoning(self) -> None:
        text = "".join(self._reasoning)
        self._reasoning.clear()
        chunker = BlockChunker(self._settings.min_chars, self._settings.max_chars)
        body = "\n".join(f"> {line}" for line in text.strip().splitlines())
        self._enqueue_all([*chunker.push(body), *chunker.flush()])

    def _flush(self) -> None:
        if self._reasoning:
            self._flush_reasoning()
        self._enqueue_all(self._chunker.flush())

    def _enqueue_all(self, blocks: list[Block]) -> None:
        for block in blocks:
            text = clean_block(block.text)
            if text:
                self._queue.put_nowait(text)

    async def _idle(self) -> None:
        idle_s = self._settings.idle_ms / 1000
        while True:
            if not self._chunker.buffered:
                self._wake.clear()
                await self._wake.wait()
                continue
            remaining = self._last_event + idle_s - self._clock.now()
            if remaining > 0:
                await self._clock.sleep(remaining)
                continue
            self._flush()

    async def _sender(self) -> None:
        index = 0
        while True:
            text = await self._queue.get()
            if text is None:
                return
            if self.report.error is not None:
                continue
            if index > 0:
                await self._human_delay()
            try:
                result = await self._send(text, index)
            except Exception as exc:  # the adapter layer reports failures as results; this is a last guard
                result = DeliveryResult(False, error=None)
                self.report.error = f"send failed: {exc}"
            index += 1
            self.report.attempts += result.attempts
            if result.success:
                self.report.blocks_sent += 1
                self.report.message_ids.extend(result.message_ids)
            elif self.report.error is None:
                self.report.error = result.error.message if result.error else "send failed"

    async def _human_delay(self) -> None:
        span = self._settings.human_delay_ms
        if not span or span[1] <= 0:
            return
        low, high = sorted(span)
        delay = self._rng.uniform(low, high) / 1000
        self.report.delays.append(delay)
        await self._clock.sleep(delay)
