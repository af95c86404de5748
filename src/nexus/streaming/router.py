"""The stream router: one delivery's StreamEvents to its adapter, natively or in blocks (seed 004).

``await router.deliver(target, events)`` picks the path from the adapter's ``info``:

- **native**: the adapter lists ``stream`` (and config does not force ``mode = "blocks"``):
  each event becomes a JSONL line on the stdin of the account's long-running ``stream``
  process; the router then waits for ``delivery_complete`` / ``delivery_error``. Every wait
  is bounded: a write that cannot go out for ``write_timeout_s`` (the adapter stopped
  reading) and a finish that does not come in ``finish_timeout_s`` both kill the process.
- **blocks**: anything else; the :class:`~nexus.streaming.pipeline.BlockPipeline` coalesces
  tokens into blocks and calls ``send`` once per block (``reply_to_id`` on the first only).

Whatever the source does, the adapter sees one well-formed delivery: ``stream_start`` first
(made from the target if the source has none), ``stream_end{final:false}`` between model
calls, and exactly one ``stream_end{final:true}`` or ``stream_error{partial}`` last. A source
that raises becomes ``stream_error``; the router itself never raises for an adapter's fault:
the :class:`DeliveryReport` says what happened, for the broker to keep with the turn.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from nexus import telemetry
from nexus.adapters import AdapterError, AdapterManager, Clock, DeliveryResult, DeliveryTarget, StreamDelivery
from nexus.streaming.events import (
    Reasoning,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    Token,
    is_terminal,
    to_line,
)
from nexus.streaming.pipeline import BlockPipeline
from nexus.streaming.settings import block_settings
from nexus.telemetry import failure_level

if TYPE_CHECKING:
    from nexus.ledger import DeliveryStatus

log = logging.getLogger("nexus.streaming")

DeliveryPath = Literal["native", "blocks", "none"]
FINISH_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 30.0
_BATCH = 256


@dataclass(slots=True)
class DeliveryReport:
    """The outcome of one delivery: path, message ids, and the error with ``partial`` if it failed."""

    target: DeliveryTarget
    path: DeliveryPath
    ok: bool = True
    message_ids: list[str] = field(default_factory=list)
    blocks_sent: int = 0
    events: int = 0
    error: str | None = None
    partial: bool = False
    attempts: int = 0
    """``send`` calls on the block path (retries included); 1 for a native delivery that reached its process."""

    @property
    def status(self) -> DeliveryStatus:
        """``delivered``, ``partial`` (some text reached the user before it failed) or ``failed``."""
        if self.ok:
            return "delivered"
        return "partial" if self.partial else "failed"

    def failed(self, error: str, partial: bool) -> DeliveryReport:
        if self.ok or self.error is None:
            self.error = error
        self.ok = False
        self.partial = self.partial or partial
        return self


class _Framer:
    """Normalises a source into one delivery; tracks whether any text went out (for ``partial``)."""

    def __init__(self, target: DeliveryTarget, run_id: str, session_label: str, reasoning: bool) -> None:
        self.target = target
        self.run_id = run_id
        self.session_label = session_label
        self.reasoning = reasoning
        self.text_seen = False

    async def frame(self, source: AsyncIterable[StreamEvent]) -> AsyncIterator[StreamEvent]:
        started = False
        try:
            async for event in source:
                kind = type(event)
                if kind is StreamStart:
                    if not started:
                        started = True
                        self.run_id = event.run_id or self.run_id  # type: ignore[union-attr]
                        yield StreamStart(self.run_id, event.session_label or self.session_label, self.target)  # type: ignore[union-attr]
                    continue
                if not started:
                    started = True
                    yield StreamStart(self.run_id, self.session_label, self.target)
                if kind is Reasoning and not self.reasoning:
                    continue
                if kind is Token:
                    self.text_seen = True
                if kind is StreamError:
                    event = StreamError(event.error, event.partial or self.text_seen)  # type: ignore[union-attr]
                yield event
                if is_terminal(event):
                    return
        except Exception as exc:  # the run's event source broke: the delivery still ends well-formed
            log.warning("stream source for %s failed: %s", self.target.key, exc)
            if not started:
                yield StreamStart(self.run_id, self.session_label, self.target)
            yield StreamError(f"the run's event stream failed: {exc}", self.text_seen)
            return
        if not started:
            yield StreamStart(self.run_id, self.session_label, self.target)
        yield StreamEnd(self.run_id, final=True)


_Deliver = TypeVar("_Deliver", bound=Callable[..., Awaitable[DeliveryReport]])


def _measured(deliver: _Deliver) -> _Deliver:
    """Every delivery's outcome as a metric (``nexus_adapter_deliveries_total``) and one log line."""

    @functools.wraps(deliver)
    async def measured(*args: Any, **kwargs: Any) -> DeliveryReport:
        report = await deliver(*args, **kwargs)
        target = report.target
        telemetry.metrics().delivery(target.channel, report.status)
        fields = {
            "event": "delivery",
            "adapter": target.channel,
            "account": target.account_id,
            "path": report.path,
            "status": report.status,
            "attempts": report.attempts,
            "error": report.error,
        }
        log.log(logging.INFO if report.status == "delivered" else failure_level(log),
                "delivery to %s: %s", target.key, report.status, extra={"fields": fields})  # fmt: skip
        return report

    return cast(_Deliver, measured)


class StreamRouter:
    """Routes deliveries to the adapters of an :class:`AdapterManager`."""

    def __init__(
        self,
        manager: AdapterManager,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        finish_timeout_s: float = FINISH_TIMEOUT_S,
        write_timeout_s: float = WRITE_TIMEOUT_S,
    ) -> None:
        self.manager = manager
        self.clock = clock or manager.clock
        self.rng = rng or random.Random()
        self.finish_timeout_s = finish_timeout_s
        self.write_timeout_s = write_timeout_s

    @_measured
    async def deliver(
        self,
        target: DeliveryTarget,
        events: AsyncIterable[StreamEvent],
        *,
        run_id: str = "",
        session_label: str = "",
        framed: bool = False,
    ) -> DeliveryReport:
        """Deliver one run's events to ``target``; returns the report (adapter faults never raise).

        ``framed``: the source is one well-formed delivery already (``stream_events`` of a run), so it
        is not framed again.
        """
        try:
            config = self.manager.config(target.channel)
            self.manager.account(target.channel, target.account_id)
            info = await self.manager.info(target.channel)
        except Exception as exc:  # unknown adapter, disabled account, info failed: the run goes on
            await _drain(events)
            log.warning("delivery to %s not possible: %s", target.key, exc)
            return DeliveryReport(target, "none").failed(str(exc), partial=False)
        source = events if framed else _Framer(target, run_id, session_label, config.reasoning).frame(events)
        native = info.can("stream") and config.mode != "blocks"
        if config.mode == "native" and not info.can("stream"):
            log.warning("adapter %s: mode = native but its info does not list stream; using blocks", target.channel)
        if native:
            return await self._native(target, aiter(source), config.reasoning)
        return await self._blocks(target, aiter(source), info.platform, info.text_limit)

    async def _blocks(
        self,
        target: DeliveryTarget,
        framed: AsyncIterator[StreamEvent],
        platform: str,
        text_limit: int | None,
    ) -> DeliveryReport:
        overrides = self.manager.options(target.channel)
        settings = block_settings(
            platform, {**overrides, "reasoning": self.manager.config(target.channel).reasoning}, text_limit=text_limit
        )

        async def send(text: str, index: int) -> DeliveryResult:
            return await self.manager.send(target, text, first=index == 0)

        pipeline = BlockPipeline(settings, send, clock=self.clock, rng=self.rng)
        outcome = await pipeline.run(framed)
        await _drain(framed)
        report = DeliveryReport(
            target,
            "blocks",
            message_ids=outcome.message_ids,
            blocks_sent=outcome.blocks_sent,
            attempts=outcome.attempts,
        )
        if outcome.error is not None:
            report.failed(outcome.error, partial=outcome.blocks_sent > 0)
        elif outcome.stream_error is not None:
            report.failed(outcome.stream_error, partial=outcome.blocks_sent > 0)
        return report

    async def _native(
        self, target: DeliveryTarget, framed: AsyncIterator[StreamEvent], reasoning: bool
    ) -> DeliveryReport:
        report = DeliveryReport(target, "native")
        relay = _Relay(reasoning)
        pump = asyncio.create_task(_pump(framed, relay), name=f"nexus-stream-pump-{target.key}")
        try:
            pool = await self.manager.stream_pool(target.channel, target.account_id)
            async with pool.delivery(target.key) as delivery:
                report.attempts = 1
                await _write_all(delivery, relay, report, self.write_timeout_s)
                report.message_ids = delivery.message_ids  # also on failure: what the user already sees
                # ``partial`` only when the adapter said something reached the user: text written to
                # a process that died at once is not text the user saw
                if delivery.dead:  # the account is free for its next delivery; the rest of this run is dropped
                    relay.drop()
                    return report.failed(delivery.error or "the stream process went away", partial=delivery.shown)
                try:
                    await asyncio.wait_for(delivery.done.wait(), self.finish_timeout_s)
                except TimeoutError:
                    await delivery.supervisor.kill_for_restart()
                    error = (
                        f"adapter {target.channel}/{target.account_id}: no delivery_complete within "
                        f"{self.finish_timeout_s:g} s; restarting it"
                    )
                    return report.failed(error, partial=delivery.shown)
                if delivery.error is not None:
                    return report.failed(delivery.error, partial=delivery.shown)
                return report
        except AdapterError as exc:
            relay.drop()
            return report.failed(str(exc), partial=False)
        except asyncio.CancelledError:
            pump.cancel()
            raise
        finally:
            if not pump.done():
                await pump  # the source is always consumed to its end

    async def close(self) -> None:
        await self.manager.close()


class _Relay:
    """Events on their way from the run to the adapter: buffered, or dropped once the delivery is over.
    ``reasoning``: the adapter takes ``reasoning`` events (config ``reasoning``)."""

    __slots__ = ("dropping", "events", "ready", "reasoning")

    def __init__(self, reasoning: bool = True) -> None:
        self.events: collections.deque[StreamEvent | None] = collections.deque()
        self.ready = asyncio.Event()
        self.dropping = False
        self.reasoning = reasoning

    def drop(self) -> None:
        """The delivery ended early: what the run still sends is read and thrown away, never kept."""
        self.dropping = True
        self.events.clear()


async def _pump(source: AsyncIterator[StreamEvent], relay: _Relay) -> None:
    """Move events from the run into the relay as they come, so a waiting delivery never holds the run up."""
    count = 0
    events, reasoning = relay.events, relay.reasoning
    try:
        async for event in source:
            if relay.dropping or (not reasoning and type(event) is Reasoning):
                continue
            events.append(event)
            relay.ready.set()
            count += 1
            if count % _BATCH == 0:
                await asyncio.sleep(0)  # let the writer take a batch
    finally:
        events.append(None)
        relay.ready.set()


async def _write_all(delivery: StreamDelivery, relay: _Relay, report: DeliveryReport, write_timeout_s: float) -> None:
    """Write the relay's events to the process (one write per batch) until the end marker or its death.

    A process that is gone (or was killed for not reading) ends this at once: the account's next
    delivery need not wait for this run to finish, and the run never waits on an adapter.
    """
    buffer = relay.events
    while True:
        if not buffer:
            relay.ready.clear()
            await relay.ready.wait()
            continue
        lines: list[bytes] = []
        end = False
        while buffer:
            event = buffer.popleft()
            if event is None:
                end = True
                break
            lines.append(to_line(event))
        report.events += len(lines)
        if lines and (not delivery.write(b"".join(lines)) or not await delivery.drain(write_timeout_s)):
            delivery.fail(delivery.error or "the stream process closed its stdin in the middle of a delivery")
        if end or delivery.dead:
            return


async def _drain(events: AsyncIterable[StreamEvent]) -> None:
    with contextlib.suppress(Exception):
        async for _ in events:
            pass
