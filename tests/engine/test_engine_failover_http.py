"""Failover against the real providers over loopback HTTP (the fake provider server)."""

from __future__ import annotations

from nexus.config import ResolvedProfile
from nexus.engine import RetryEvent
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.failover import failover_stream
from nexus.engine.types import EngineEvent
from nexus.llm.events import DoneEvent, ErrorEvent
from nexus.llm.types import Context, Model, UserMessage
from nexus.testing import FakeProviderServer, steps


async def test_openai_429_rotates_to_second_key_then_overflow_passes_through() -> None:
    async with FakeProviderServer(
        steps.http_error(429, retry_after=1), steps.text("hello"), steps.overflow()
    ) as server:
        model = Model("gpt-test", "openai", "openai-completions", base_url=server.openai_base_url)
        events: list[EngineEvent] = []
        slept: list[float] = []

        async def fake_sleep(seconds: float) -> None:
            slept.append(seconds)

        fn = failover_stream(
            [model],
            {"openai": [ResolvedProfile("first", "key-1"), ResolvedProfile("second", "key-2")]},
            on_event=events.append,
            cooldowns=ProfileCooldowns(),
            sleep=fake_sleep,
        )
        context = Context("sys", [UserMessage("hi")])
        out = [e async for e in fn(model, context, None)]
        assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "hello"
        assert [r.headers.get("authorization") for r in server.requests] == ["Bearer key-1", "Bearer key-2"]
        assert len(events) == 1 and isinstance(events[0], RetryEvent) and events[0].error_kind == "rate_limit"
        assert slept == []
        overflow = [e async for e in fn(model, context, None)]
        assert isinstance(overflow[-1], ErrorEvent) and overflow[-1].error.error_kind == "context_overflow"
        assert len(server.requests) == 3
        server.assert_complete()
