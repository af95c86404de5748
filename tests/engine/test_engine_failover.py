"""Failover: profile rotation, cooldowns, waits, auth_permanent, model fallback, no retry after content."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from nexus.config import ResolvedProfile
from nexus.engine import EngineLimits, FallbackEvent, RetryEvent, WaitEvent
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.failover import failover_stream
from nexus.engine.types import EngineEvent, TokenBudget
from nexus.errors import ConfigError
from nexus.llm.abort import AbortSignal
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
)
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, ErrorKind, Model, TextContent, UserMessage

PRIMARY = Model("big", "anthropic", "anthropic-messages", context_window=200_000, max_tokens=8_192)
FALLBACK = Model("small", "openai", "openai-completions", context_window=16_000, max_tokens=4_096)
CONTEXT = Context("sys", [UserMessage("hi")])


@dataclass
class Step:
    """One scripted call: fail with ``error`` before content, or stream ``text`` (then maybe fail)."""

    error: ErrorKind | None = None
    text: str = "ok"
    retry_after: float | None = None
    fail_after_text: bool = False


@dataclass
class FakeProvider:
    """A scripted inner StreamFn recording (model, api key) per call."""

    steps: list[Step]
    calls: list[tuple[str, str | None]] = field(default_factory=list)

    async def __call__(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.calls.append((model.ref, options.api_key if options else None))
        step = self.steps.pop(0)
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(partial)
        if step.error is not None and not step.fail_after_text:
            partial.stop_reason = "error"
            partial.error_kind = step.error
            partial.error_message = f"{step.error} from {model.ref}"
            partial.retry_after = step.retry_after
            yield ErrorEvent("error", partial)
            return
        partial.content.append(TextContent(""))
        yield TextStartEvent(0, partial)
        partial.content[0] = TextContent(step.text)
        yield TextDeltaEvent(0, step.text, partial)
        if step.fail_after_text:
            partial.stop_reason = "error"
            partial.error_kind = step.error
            partial.error_message = "connection reset mid-stream"
            partial.retry_after = step.retry_after
            yield ErrorEvent("error", partial)
            return
        yield TextEndEvent(0, step.text, partial)
        yield DoneEvent("stop", partial)


class FakeClock:
    """A monotonic clock advanced only by the fake sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


PROFILES = {"anthropic": [ResolvedProfile("p1", "key-1"), ResolvedProfile("p2", "key-2")]}


async def collect(stream: AsyncIterator[AssistantMessageEvent]) -> list[AssistantMessageEvent]:
    return [event async for event in stream]


def make(
    steps: list[Step],
    *,
    chain: list[Model] | None = None,
    profiles: dict[str, list[ResolvedProfile]] | None = None,
    limits: EngineLimits | None = None,
    budget_for: object = None,
) -> tuple[FakeProvider, FakeClock, list[EngineEvent], object]:
    provider = FakeProvider(list(steps))
    clock = FakeClock()
    events: list[EngineEvent] = []
    fn = failover_stream(
        chain or [PRIMARY],
        PROFILES if profiles is None else profiles,
        limits,
        events.append,
        inner=provider,
        cooldowns=ProfileCooldowns(),
        budget_for=budget_for,  # type: ignore[arg-type]
        clock=clock,
        sleep=clock.sleep,
    )
    return provider, clock, events, fn


async def test_rate_limit_on_first_profile_rotates_to_second_without_waiting() -> None:
    provider, clock, events, fn = make([Step(error="rate_limit"), Step(text="hello")])
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert provider.calls == [("anthropic/big", "key-1"), ("anthropic/big", "key-2")]
    assert [e.type for e in out] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "hello"
    assert clock.sleeps == []
    retry = events[0]
    assert isinstance(retry, RetryEvent)
    assert (retry.attempt, retry.profile, retry.next_profile, retry.error_kind) == (1, "p1", "p2", "rate_limit")
    assert retry.delay_s == 0 and retry.model == "anthropic/big"


async def test_all_profiles_cooling_waits_for_the_soonest_then_succeeds() -> None:
    steps = [Step(error="overloaded"), Step(error="rate_limit", retry_after=5.0), Step(text="finally")]
    provider, clock, events, fn = make(steps)
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    # p1 cools 1 s, p2 cools 5 s (server retry_after beats the 1 s backoff): wait 1 s for p1.
    assert clock.sleeps == [1.0]
    assert provider.calls[-1] == ("anthropic/big", "key-1")
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "finally"
    # the wait is announced once, by the retry that causes it (no WaitEvent repeating it)
    retries = [(e.profile, e.next_profile, e.delay_s) for e in events if isinstance(e, RetryEvent)]
    assert retries == [("p1", "p2", 0.0), ("p2", "p1", 1.0)]
    assert not [e for e in events if isinstance(e, WaitEvent)]


async def test_backoff_doubles_and_resets_on_success() -> None:
    cooldowns = ProfileCooldowns(initial_s=1.0, max_s=4.0)
    assert cooldowns.record_failure("x", "p", 0.0) == 1.0
    assert cooldowns.record_failure("x", "p", 0.0) == 2.0
    assert cooldowns.record_failure("x", "p", 0.0) == 4.0
    assert cooldowns.record_failure("x", "p", 0.0) == 4.0  # capped
    assert cooldowns.record_failure("x", "p", 0.0, retry_after=30.0) == 30.0
    assert cooldowns.remaining("x", "p", 10.0) == 20.0
    assert cooldowns.failures("x", "p") == 5
    cooldowns.record_success("x", "p")
    assert cooldowns.remaining("x", "p", 10.0) == 0.0
    assert cooldowns.record_failure("x", "p", 0.0) == 1.0


async def test_single_profile_retries_with_growing_waits() -> None:
    steps = [Step(error="timeout"), Step(error="timeout"), Step(text="ok")]
    provider, clock, _events, fn = make(steps, profiles={"anthropic": [ResolvedProfile("only", "k")]})
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert clock.sleeps == [1.0, 2.0]
    assert len(provider.calls) == 3
    assert isinstance(out[-1], DoneEvent)


async def test_auth_permanent_disables_profile_for_the_run() -> None:
    steps = [Step(error="auth_permanent"), Step(text="one"), Step(error="rate_limit"), Step(text="two")]
    provider, clock, _events, fn = make(steps)
    await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    # Second call: p1 is dead, so p2 is retried (after its cooldown) rather than rotating back to p1.
    assert [key for _, key in provider.calls] == ["key-1", "key-2", "key-2", "key-2"]
    assert clock.sleeps == [1.0]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "two"


async def test_fallback_chain_after_max_retries_recomputes_budget() -> None:
    limits = EngineLimits(max_retries=1)
    budgets: list[str] = []

    def budget_for(model: Model) -> TokenBudget:
        budgets.append(model.ref)
        return TokenBudget(context_window=200_000, history=1_000).for_model(model)

    steps = [Step(error="rate_limit"), Step(error="rate_limit"), Step(text="from fallback")]
    provider, _clock, events, fn = make(steps, chain=[PRIMARY, FALLBACK], limits=limits, budget_for=budget_for)
    out = await collect(fn(PRIMARY, CONTEXT, StreamOptions(api_key="caller-key")))  # type: ignore[operator]
    assert provider.calls == [("anthropic/big", "key-1"), ("anthropic/big", "key-2"), ("openai/small", None)]
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "from fallback"
    fallback = [e for e in events if isinstance(e, FallbackEvent)]
    assert budgets == ["openai/small"]
    assert len(fallback) == 1 and fallback[0].from_model == "anthropic/big" and fallback[0].to_model == "openai/small"
    assert fallback[0].budget is not None and fallback[0].budget.context_window == 16_000
    assert fallback[0].budget.reserve_output == 4_000  # 4,096 capped at a quarter of the 16k window
    assert fallback[0].reason == "rate_limit" and not fallback[0].skipped


async def test_fallback_model_too_small_for_the_prompt_is_skipped() -> None:
    third = Model("huge", "google", "google", context_window=1_000_000)
    steps = [Step(error="overloaded"), Step(error="overloaded"), Step(text="third")]

    def budget_for(model: Model) -> TokenBudget:
        return TokenBudget(context_window=200_000, history=50_000).for_model(model)

    provider, _clock, events, fn = make(
        steps,
        chain=[PRIMARY, FALLBACK, third],
        limits=EngineLimits(max_retries=1),
        budget_for=budget_for,
    )
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert [ref for ref, _ in provider.calls] == ["anthropic/big", "anthropic/big", "google/huge"]
    fallbacks = [e for e in events if isinstance(e, FallbackEvent)]
    assert [(f.to_model, f.skipped) for f in fallbacks] == [("openai/small", True), ("google/huge", False)]
    assert isinstance(out[-1], DoneEvent)


async def test_exhausted_chain_passes_last_error_through() -> None:
    steps = [Step(error="billing"), Step(error="billing")]
    provider, _clock, _events, fn = make(steps, limits=EngineLimits(max_retries=1))
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert len(provider.calls) == 2
    assert [e.type for e in out] == ["error"]
    assert isinstance(out[0], ErrorEvent) and out[0].error.error_kind == "billing"


async def test_no_retry_after_content_was_streamed() -> None:
    provider, _clock, events, fn = make([Step(error="timeout", text="partial", fail_after_text=True), Step()])
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert len(provider.calls) == 1
    assert [e.type for e in out] == ["start", "text_start", "text_delta", "error"]
    assert isinstance(out[-1], ErrorEvent) and out[-1].error.text == "partial"
    assert events == []
    # The profile is still put in cooldown, so the next call starts on the other one.
    provider.steps = [Step(text="next")]
    await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert provider.calls[-1][1] == "key-2"


@pytest.mark.parametrize("kind", ["context_overflow", "format", "unknown"])
async def test_non_rotating_errors_pass_through_untouched(kind: ErrorKind) -> None:
    provider, _clock, events, fn = make([Step(error=kind), Step()], chain=[PRIMARY, FALLBACK])
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert len(provider.calls) == 1
    assert [e.type for e in out] == ["start", "error"]
    assert isinstance(out[-1], ErrorEvent) and out[-1].error.error_kind == kind
    assert events == []


async def test_abort_during_cooldown_wait_ends_with_aborted() -> None:
    signal = AbortSignal()

    async def never_ending_sleep(seconds: float) -> None:
        signal.abort("user pressed stop")
        await asyncio.Event().wait()

    provider = FakeProvider([Step(error="rate_limit"), Step()])
    fn = failover_stream(
        [PRIMARY],
        {"anthropic": [ResolvedProfile("only", "k")]},
        inner=provider,
        cooldowns=ProfileCooldowns(),
        sleep=never_ending_sleep,
    )
    out = await asyncio.wait_for(collect(fn(PRIMARY, CONTEXT, StreamOptions(signal=signal))), timeout=5)
    assert len(provider.calls) == 1
    assert [e.type for e in out] == ["error"]
    assert isinstance(out[0], ErrorEvent) and out[0].reason == "aborted"
    assert out[0].error.stop_reason == "aborted"


async def test_aborted_before_call_makes_no_request() -> None:
    signal = AbortSignal()
    signal.abort()
    provider, _clock, _events, fn = make([Step()])
    out = await collect(fn(PRIMARY, CONTEXT, StreamOptions(signal=signal)))  # type: ignore[operator]
    assert provider.calls == [] and isinstance(out[0], ErrorEvent) and out[0].reason == "aborted"


async def test_long_retry_after_falls_back_instead_of_waiting() -> None:
    steps = [Step(error="rate_limit", retry_after=3600), Step(text="fallback")]
    provider, clock, _events, fn = make(
        steps, chain=[PRIMARY, FALLBACK], profiles={"anthropic": [ResolvedProfile("only", "k")]}
    )
    out = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert clock.sleeps == []
    assert [ref for ref, _ in provider.calls] == ["anthropic/big", "openai/small"]
    assert isinstance(out[-1], DoneEvent)


async def test_cooldowns_are_shared_across_runs() -> None:
    cooldowns = ProfileCooldowns()
    clock = FakeClock()
    provider = FakeProvider([Step(error="rate_limit"), Step(text="a"), Step(text="b")])
    for _run in range(2):
        fn = failover_stream([PRIMARY], PROFILES, inner=provider, cooldowns=cooldowns, clock=clock, sleep=clock.sleep)
        await collect(fn(PRIMARY, CONTEXT, None))
    # Run 2 starts on p2: p1 is still cooling from run 1 (the fake clock did not move).
    assert [key for _, key in provider.calls] == ["key-1", "key-2", "key-2"]


async def test_provider_without_profiles_uses_callers_options() -> None:
    provider, _clock, _events, fn = make([Step()], profiles={})
    await collect(fn(PRIMARY, CONTEXT, StreamOptions(api_key="from-caller")))  # type: ignore[operator]
    assert provider.calls == [("anthropic/big", "from-caller")]


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigError, match="at least one model"):
        failover_stream([])
    with pytest.raises(ConfigError, match="unique"):
        failover_stream([PRIMARY], {"anthropic": [ResolvedProfile("a", "1"), ResolvedProfile("a", "2")]})
    with pytest.raises(ConfigError, match="cooldowns"):
        ProfileCooldowns(initial_s=0)


def test_api_key_is_not_in_repr() -> None:
    assert "secret" not in repr(ResolvedProfile("main", "secret-key"))


async def test_with_scripted_model_429_then_overflow_passes_through() -> None:
    from nexus.testing import ScriptedModel, steps

    scripted = ScriptedModel([steps.http_error(429, retry_after=2), steps.text("hi"), steps.overflow()])
    clock = FakeClock()
    events: list[EngineEvent] = []
    fn = failover_stream(
        [scripted.model],
        {"scripted": [ResolvedProfile("a", "ka"), ResolvedProfile("b", "kb")]},
        on_event=events.append,
        inner=scripted.stream,
        cooldowns=ProfileCooldowns(),
        clock=clock,
        sleep=clock.sleep,
    )
    out = await collect(fn(scripted.model, CONTEXT, None))
    assert isinstance(out[-1], DoneEvent) and out[-1].message.text == "hi"
    assert [type(e) for e in events] == [RetryEvent]
    overflow = await collect(fn(scripted.model, CONTEXT, None))
    assert isinstance(overflow[-1], ErrorEvent) and overflow[-1].error.error_kind == "context_overflow"
    scripted.assert_complete()


async def test_all_profiles_disabled_reports_auth_error_without_calling() -> None:
    provider, _clock, events, fn = make(
        [Step(error="auth_permanent")], profiles={"anthropic": [ResolvedProfile("a", "k")]}
    )
    first = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert isinstance(first[-1], ErrorEvent) and first[-1].error.error_kind == "auth_permanent"
    second = await collect(fn(PRIMARY, CONTEXT, None))  # type: ignore[operator]
    assert len(provider.calls) == 1
    assert isinstance(second[-1], ErrorEvent) and "rejected as invalid" in (second[-1].error.error_message or "")
    assert events == []  # no retry was made, so none is announced


async def test_call_for_a_fallback_model_only_falls_back_further() -> None:
    third = Model("third", "openai", "openai-completions")
    steps = [Step(error="overloaded"), Step(text="third")]
    provider, _clock, _events, fn = make(steps, chain=[PRIMARY, FALLBACK, third], limits=EngineLimits(max_retries=0))
    out = await collect(fn(FALLBACK, CONTEXT, None))  # type: ignore[operator]
    assert [ref for ref, _ in provider.calls] == ["openai/small", "openai/third"]
    assert isinstance(out[-1], DoneEvent)


async def test_a_consumer_that_stops_at_done_leaves_no_generator_for_the_loops_finalizer() -> None:
    """The agent loop stops reading at ``done`` and closes the stream: every layer under it is closed then.

    A layer left suspended was closed later by asyncio's hook for abandoned async generators (a self-pipe
    write and a task per generator, four per model call in the broker's end-to-end benchmark).
    """
    _, _, _, fn = make([Step(text="hello")])
    hooks = sys.get_asyncgen_hooks()
    abandoned: list[str] = []

    def finalizer(agen: Any) -> None:
        abandoned.append(agen.ag_code.co_qualname)
        hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        stream = fn(PRIMARY, CONTEXT, None)  # type: ignore[operator]
        async for event in stream:
            if isinstance(event, DoneEvent):
                break
        await stream.aclose()
        gc.collect()  # a generator nothing refers to any more reaches the finalizer now at the latest
        await asyncio.sleep(0)
    finally:
        sys.set_asyncgen_hooks(*hooks)
    assert abandoned == []


async def _run_like_the_agent(fn: object, prompt: str) -> None:
    """One agent-loop run: it stops reading at ``done`` and closes the stream."""
    from nexus.agent import AgentContext, AgentLoopConfig, agent_loop

    async for _ in agent_loop(UserMessage(prompt), AgentContext(), AgentLoopConfig(PRIMARY, stream_fn=fn)):  # type: ignore[arg-type]
        pass


async def test_a_success_resets_the_backoff_when_the_consumer_stops_at_done() -> None:
    """The success must be recorded before the consumer has ``done``: the agent loop asks for nothing after it.

    It was recorded only when a consumer asked past ``done``, which the loop never does: in a long-lived process
    every rate limit doubled the profile's next cooldown, up to a minute, however many calls succeeded between.
    """
    cooldowns = ProfileCooldowns()
    clock = FakeClock()
    provider = FakeProvider([Step(error="rate_limit"), Step(text="after a second")])
    fn = failover_stream([PRIMARY], {"anthropic": [ResolvedProfile("only", "k")]}, None, None, inner=provider,
                         cooldowns=cooldowns, clock=clock, sleep=clock.sleep)  # fmt: skip
    await _run_like_the_agent(fn, "one")
    assert clock.sleeps == [1.0] and len(provider.calls) == 2
    assert cooldowns.failures("anthropic", "only") == 0
    assert cooldowns.record_failure("anthropic", "only", clock.now) == 1.0  # the backoff starts over


async def test_the_profile_that_answered_is_tried_first_next_time_when_the_consumer_stops_at_done() -> None:
    cooldowns = ProfileCooldowns()
    clock = FakeClock()
    provider = FakeProvider([Step(error="rate_limit"), Step(text="from p2"), Step(text="p2 again")])
    fn = failover_stream([PRIMARY], PROFILES, None, None, inner=provider, cooldowns=cooldowns, clock=clock,
                         sleep=clock.sleep)  # fmt: skip
    await _run_like_the_agent(fn, "one")
    clock.now += 60.0  # p1's cooldown is long over: only the pin sends the next call to p2
    await _run_like_the_agent(fn, "two")
    assert [key for _, key in provider.calls] == ["key-1", "key-2", "key-2"]


async def test_a_stream_that_ends_without_done_or_error_counts_as_a_success() -> None:
    """As before the success moved to `done`: an attempt whose stream just ends (no final event) resets the
    profile's backoff; one that ends in a late error does not."""
    cooldowns = ProfileCooldowns()
    cooldowns.record_failure("anthropic", "only", 0.0)

    async def ends_early(
        model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(partial)
        partial.content.append(TextContent("cut"))
        yield TextDeltaEvent(0, "cut", partial)

    fn = failover_stream([PRIMARY], {"anthropic": [ResolvedProfile("only", "k")]}, None, None, inner=ends_early,
                         cooldowns=cooldowns, clock=FakeClock())  # fmt: skip
    assert [e.type for e in await collect(fn(PRIMARY, CONTEXT, None))] == ["start", "text_delta"]
    assert cooldowns.failures("anthropic", "only") == 0
    late = FakeProvider([Step(error="network", fail_after_text=True)])
    fn = failover_stream([PRIMARY], {"anthropic": [ResolvedProfile("only", "k")]}, None, None, inner=late,
                         cooldowns=cooldowns, clock=FakeClock())  # fmt: skip
    assert isinstance((await collect(fn(PRIMARY, CONTEXT, None)))[-1], ErrorEvent)
    assert cooldowns.failures("anthropic", "only") == 1
