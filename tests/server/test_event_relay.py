"""The event relay on a real PostgreSQL database: two relays (two processes' hubs) writing at once see one log
with the same ids in the same order, and a resume is answered from the log, or with ``reset`` once trimmed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from nexus.ledger import Ledger
from nexus.server._event_hub import EventHub
from nexus.server._event_relay import EventRelay

pytestmark = pytest.mark.slow  # a real PostgreSQL


@asynccontextmanager
async def _relay(url: str) -> AsyncIterator[EventRelay]:
    async with await Ledger.connect(url) as ledger:
        events = ledger.run_events
        assert events is not None
        relay = EventRelay(EventHub(heartbeat_seconds=60), events)
        await relay.start()
        try:
            yield relay
        finally:
            await relay.close()


async def _until(condition: object, what: str) -> None:
    for _ in range(1000):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_two_relays_writing_at_once_share_one_log_in_one_order(postgres_url: str) -> None:
    async with _relay(postgres_url) as a, _relay(postgres_url) as b:

        async def write(relay: EventRelay, name: str) -> None:
            for n in range(300):
                relay.publish("s", "token", {"text": f"{name}{n}"})
                if n % 7 == 0:
                    await asyncio.sleep(0.001)  # spread over many batches of both

        await asyncio.gather(write(a, "a"), write(b, "b"))
        await _until(lambda: len(a.hub.retained("s")) == 600 and len(b.hub.retained("s")) == 600, "600 on both")
        on_a, on_b = a.hub.retained("s"), b.hub.retained("s")
        assert [(e.id, e.frame) for e in on_a] == [(e.id, e.frame) for e in on_b]  # one log, one order
        ids = [e.id for e in on_a]
        assert ids == sorted(set(ids))
        texts = [json.loads(e.frame.split(b"data: ", 1)[1])["text"] for e in on_a]
        for name in "ab":  # each writer's events in the order it published them
            assert [t for t in texts if t[0] == name] == [f"{name}{n}" for n in range(300)]
        assert a.written == b.written == 300


async def test_a_resume_below_what_the_hub_holds_comes_from_the_log_then_reset_once_trimmed(
    postgres_url: str,
) -> None:
    async with _relay(postgres_url) as a:
        for n in range(10):
            a.publish("s", "token", {"text": str(n)})
        await _until(lambda: len(a.hub.retained("s")) == 10, "10 events")
        ids = [e.id for e in a.hub.retained("s")]
    async with _relay(postgres_url) as late:  # a process started after them: its hub holds none
        subscription = await late.subscribe("s", ids[3])
        frames = await subscription.next()
        subscription.close()
        assert (
            frames is not None
            and [int(line[4:]) for line in frames.decode().splitlines() if line.startswith("id: ")] == ids[4:]
        )
        assert await late.events.trim(older_than_ms=0, keep=3) == 7
        expired = await late.subscribe("s", ids[3])
        reset = await expired.next()
        expired.close()
        assert reset is not None and b"event: reset" in reset and b'"reason":"expired"' in reset
        unknown = await late.subscribe("s", ids[-1] + 1000)
        frame = await unknown.next()
        unknown.close()
        assert frame is not None and b'"reason":"unknown"' in frame


async def test_an_event_utf8_cannot_carry_still_goes_out_and_blocks_nothing_after_it(postgres_url: str) -> None:
    async with _relay(postgres_url) as relay:
        relay.publish("s", "token", {"text": "broken \ud800 escape"})  # a lone surrogate from a model's stream
        relay.publish("s", "token", {"text": "next"})
        await _until(lambda: len(relay.hub.retained("s")) == 2, "both events")
        texts = [json.loads(e.frame.split(b"data: ", 1)[1])["text"] for e in relay.hub.retained("s")]
        assert texts == ["broken \ud800 escape", "next"]


async def test_serve_starts_the_relay_with_the_server_config_s_batch_and_bound(postgres_url: str) -> None:
    from nexus.config import ServerConfig
    from nexus.server.serve import _start_relay

    settings = ServerConfig(events_log_flush_ms=50, events_log_max_rows=5000)
    async with await Ledger.connect(postgres_url) as ledger:
        relay = await _start_relay(ledger, EventHub(heartbeat_seconds=60), settings)
        assert relay is not None
        try:
            assert (relay.flush_s, relay.keep_rows) == (0.05, 5000)
        finally:
            await relay.close()
