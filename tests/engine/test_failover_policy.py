"""Failover policy per error kind (issue 8, items 14 and 15), on a fake clock.

A refused local server gets one quick retry, not the backoff; an auth failure is never
retried with the same key; a wait longer than ``max_wait_s`` is not announced as a retry and
the error says until when; a "still cooling down" error keeps the kind that caused it.
"""

from __future__ import annotations

from test_engine_failover import PRIMARY, FakeClock, FakeProvider, Step, collect

from nexus.config import ResolvedProfile
from nexus.engine import EngineLimits, FallbackEvent, RetryEvent, WaitEvent
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.failover import QUICK_RETRY_S, failover_stream
from nexus.engine.types import EngineEvent
from nexus.llm.events import DoneEvent, ErrorEvent
from nexus.llm.types import Context, Model, UserMessage

LOCAL = Model("qwen", "llamacpp", "openai-completions", base_url="http://127.0.0.1:8080/v1")
BACKUP = Model("small", "openai", "openai-completions")
CONTEXT = Context("sys", [UserMessage("hi")])
ONE_KEY = {"anthropic": [ResolvedProfile("only", "key-1")]}


def make(
    steps: list[Step],
    chain: list[Model],
    profiles: dict[str, list[ResolvedProfile]] | None = None,
    wall: float = 0.0,
    cooldowns: ProfileCooldowns | None = None,
) -> tuple[FakeProvider, FakeClock, list[EngineEvent], object]:
    provider = FakeProvider(list(steps))
    clock = FakeClock()
    events: list[EngineEvent] = []
    fn = failover_stream(
        chain,
        profiles or {},
        EngineLimits(),
        events.append,
        inner=provider,
        cooldowns=cooldowns or ProfileCooldowns(),
        clock=clock,
        sleep=clock.sleep,
        wall_clock=lambda: wall,
    )
    return provider, clock, events, fn


async def test_refused_local_server_gets_one_quick_retry_then_falls_back() -> None:
    provider, clock, events, fn = make(
        [Step(error="network"), Step(error="network"), Step(text="backup")], [LOCAL, BACKUP]
    )
    out = await collect(fn(LOCAL, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "backup"
    assert [ref for ref, _ in provider.calls] == ["llamacpp/qwen", "llamacpp/qwen", "openai/small"]
    assert clock.sleeps == [QUICK_RETRY_S]  # not 1 + 2 + 4 s of backoff for a server that is not running
    retry, fallback = events
    assert isinstance(retry, RetryEvent) and (retry.error_kind, retry.delay_s, retry.next_profile) == (
        "network",
        QUICK_RETRY_S,
        None,
    )
    assert isinstance(fallback, FallbackEvent) and fallback.reason == "network"


async def test_network_errors_of_a_remote_provider_back_off_as_usual() -> None:
    steps = [Step(error="network")] * 4
    provider, clock, events, fn = make(steps, [PRIMARY], ONE_KEY)
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], ErrorEvent) and out[-1].error.error_kind == "network"
    assert len(provider.calls) == 4 and clock.sleeps == [1.0, 2.0, 4.0]
    assert [e.delay_s for e in events if isinstance(e, RetryEvent)] == [1.0, 2.0, 4.0]
    assert not [e for e in events if isinstance(e, WaitEvent)]  # each wait announced once


async def test_auth_error_with_one_key_is_not_retried_but_falls_back() -> None:
    provider, clock, events, fn = make([Step(error="auth"), Step(text="from backup")], [PRIMARY, BACKUP], ONE_KEY)
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "from backup"
    assert [ref for ref, _ in provider.calls] == ["anthropic/big", "openai/small"]
    assert clock.sleeps == []
    assert [type(e) for e in events] == [FallbackEvent]  # no RetryEvent: the same key is not tried again


async def test_retry_after_beyond_max_wait_is_not_announced_and_says_until_when() -> None:
    steps = [Step(error="rate_limit", retry_after=3600)]
    provider, clock, events, fn = make(steps, [PRIMARY], ONE_KEY, wall=1_700_000_000.0)  # 2023-11-14 22:13:20 UTC
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert events == [] and clock.sleeps == [] and len(provider.calls) == 1
    assert isinstance(out[-1], ErrorEvent) and out[-1].error.error_kind == "rate_limit"
    assert out[-1].error.error_message == (
        "rate_limit from anthropic/big. Not retried: the server asks to wait 60 min (until 23:13 UTC), longer "
        "than a run waits (60 s). Try again after that, or add another key or a fallback model."
    )
    assert out[-1].error.retry_after == 3600


async def test_a_wait_past_midnight_names_the_date() -> None:
    steps = [Step(error="rate_limit", retry_after=7200)]
    _provider, _clock, _events, fn = make(steps, [PRIMARY], ONE_KEY, wall=1_700_000_000.0)
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], ErrorEvent)
    assert "wait 2.0 h (until 2023-11-15 00:13 UTC)" in (out[-1].error.error_message or "")


async def test_cooling_from_an_earlier_call_keeps_the_kind_that_caused_it() -> None:
    cooldowns = ProfileCooldowns()
    late = Step(error="overloaded", retry_after=600, fail_after_text=True)
    provider, _clock, events, fn = make([late], [PRIMARY], ONE_KEY, wall=0.0, cooldowns=cooldowns)
    first = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(first[-1], ErrorEvent)  # failed after text: passed through, the key cools 600 s
    second = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert len(provider.calls) == 1 and events == []
    assert isinstance(second[-1], ErrorEvent) and second[-1].error.error_kind == "overloaded"
    assert second[-1].error.error_message == (
        "provider 'anthropic' is cooling down after overloaded errors of earlier calls: its next key is usable in "
        "10 min (until 00:10 UTC), longer than a run waits. Try again after that, or add another key or a fallback "
        "model."
    )


async def test_a_wait_left_by_an_earlier_call_is_announced_once_with_the_key_count() -> None:
    late = Step(error="rate_limit", fail_after_text=True)
    _provider, clock, events, fn = make([late, Step(text="later")], [PRIMARY], ONE_KEY)
    await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], DoneEvent) and clock.sleeps == [1.0]
    assert events == [WaitEvent("anthropic", "only", "anthropic/big", 1.0, keys=1)]


async def test_billing_error_drops_the_key_instead_of_backing_off() -> None:
    provider, clock, events, fn = make(
        [Step(error="billing"), Step(text="from p2")],
        [PRIMARY],
        {"anthropic": [ResolvedProfile("p1", "key-1"), ResolvedProfile("p2", "key-2")]},
    )
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "from p2"
    assert clock.sleeps == [] and [key for _, key in provider.calls] == ["key-1", "key-2"]
    assert [(e.error_kind, e.next_profile, e.delay_s) for e in events if isinstance(e, RetryEvent)] == [
        ("billing", "p2", 0.0)
    ]
