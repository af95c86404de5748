"""Auth-profile rotation and model fallback, as a wrapper around a :data:`StreamFn` (seed 001).

:func:`failover_stream` returns a stream function the agent loop calls like any other.
Per call it tries the current model with the provider's auth profiles: on an
``auth``/``rate_limit``/``billing``/``overloaded``/``timeout`` error the profile cools
down (1 s, doubling to 60 s, or the server's ``retry_after`` when longer; reset on
success) and the next ready profile is tried; ``auth_permanent`` disables the profile for
the run; when every profile cools down it waits for the soonest (abortable). After
``max_retries`` retries it moves down the model fallback chain.

It retries only failures that happen before the first content event: once a token has
reached the consumer it cannot be taken back, so a later error is passed through. Nothing
is buffered except the ``start`` event, which is held until content arrives so a retried
attempt does not announce two responses. ``context_overflow`` errors are passed through for
the compaction layer; ``format`` and unclassified errors are passed through too.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from nexus.config._profile import ResolvedProfile
from nexus.engine.types import EngineEvent, EngineLimits, FallbackEvent, RetryEvent, TokenBudget, WaitEvent
from nexus.errors import ConfigError
from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.registry import resolve_api
from nexus.llm.types import AssistantMessage, Context, ErrorKind, Model

ROTATE_KINDS: frozenset[ErrorKind] = frozenset({"auth", "rate_limit", "billing", "overloaded", "timeout"})
"""Error kinds that put the profile in cooldown and try again (another profile, later, or another model)."""

_DEFAULT_PROFILE = "(default)"


@dataclass(slots=True)
class _Cooldown:
    until: float = 0.0
    next_delay: float = 1.0
    failures: int = 0


class ProfileCooldowns:
    """Per-(provider, profile) cooldowns, shared by every run of the process.

    A profile that just hit a rate limit should not be the first choice of the next run
    either, so this lives outside any one run. Times come from the caller's clock.
    """

    __slots__ = ("_state", "initial_s", "max_s")

    def __init__(self, initial_s: float = 1.0, max_s: float = 60.0) -> None:
        if not 0 < initial_s <= max_s:
            raise ConfigError(f"cooldowns need 0 < initial_s <= max_s, got {initial_s} and {max_s}")
        self.initial_s = initial_s
        self.max_s = max_s
        self._state: dict[tuple[str, str], _Cooldown] = {}

    def record_failure(self, provider: str, profile: str, now: float, retry_after: float | None = None) -> float:
        """Start (or extend) the profile's cooldown; returns its length in seconds."""
        state = self._state.setdefault((provider, profile), _Cooldown(next_delay=self.initial_s))
        delay = state.next_delay
        state.next_delay = min(delay * 2, self.max_s)
        state.failures += 1
        cooldown = max(delay, retry_after or 0.0)
        state.until = now + cooldown
        return cooldown

    def record_success(self, provider: str, profile: str) -> None:
        """Clear the profile's cooldown and reset its backoff to the initial delay."""
        self._state.pop((provider, profile), None)

    def remaining(self, provider: str, profile: str, now: float) -> float:
        """Seconds until the profile is usable again (0 when it is usable now)."""
        state = self._state.get((provider, profile))
        return max(0.0, state.until - now) if state is not None else 0.0

    def failures(self, provider: str, profile: str) -> int:
        """Failures since the profile's last success."""
        state = self._state.get((provider, profile))
        return state.failures if state is not None else 0


SHARED_COOLDOWNS = ProfileCooldowns()
"""The process-wide cooldown table used when :func:`failover_stream` is not given one."""


async def _default_inner(
    model: Model, context: Context, options: StreamOptions | None
) -> AsyncIterator[AssistantMessageEvent]:
    """``nexus.llm.stream`` when available, else the provider registered for ``model.api``."""
    module = importlib.import_module("nexus.llm")
    fn: StreamFn = getattr(module, "stream", None) or resolve_api(model.api)
    async for event in fn(model, context, options):
        yield event


def _failure(model: Model, kind: ErrorKind, text: str, retry_after: float | None = None) -> ErrorEvent:
    """A failure produced by failover itself (no provider call behind it)."""
    message = AssistantMessage(api=model.api, provider=model.provider, model=model.id, stop_reason="error")
    message.error_message = text
    message.error_kind = kind
    message.retry_after = retry_after
    return ErrorEvent("error", message)


def _cooling_error(model: Model, delay: float, last: ErrorEvent | None) -> ErrorEvent:
    """The last real error, or a rate-limit error saying every profile cools down for ``delay`` s."""
    if last is not None:
        return last
    text = (
        f"every auth profile of provider {model.provider!r} is cooling down after errors (next usable in "
        f"{delay:.0f} s); add another profile or a fallback model, or try again later"
    )
    return _failure(model, "rate_limit", text, delay)


def _aborted_event(model: Model, why: str) -> ErrorEvent:
    message = AssistantMessage(
        api=model.api, provider=model.provider, model=model.id, stop_reason="aborted", error_message=why
    )
    return ErrorEvent("aborted", message)


@dataclass(slots=True)
class _Outcome:
    """How one model's attempts ended: ``finished`` (the consumer got a final event) or a failure."""

    finished: bool = False
    last_error: ErrorEvent | None = None


class _Failover:
    """The state of one run's failover: disabled profiles and the profile pinned per provider."""

    def __init__(
        self,
        chain: Sequence[Model],
        profiles: Mapping[str, Sequence[ResolvedProfile]],
        limits: EngineLimits,
        on_event: Callable[[EngineEvent], None] | None,
        inner: StreamFn,
        cooldowns: ProfileCooldowns,
        budget_for: Callable[[Model], TokenBudget] | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.chain = list(chain)
        self.profiles = profiles
        self.limits = limits
        self.on_event = on_event
        self.inner = inner
        self.cooldowns = cooldowns
        self.budget_for = budget_for
        self.clock = clock
        self.sleep = sleep
        self.dead: set[tuple[str, str]] = set()
        self.pinned: dict[str, str] = {}

    def emit(self, event: EngineEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def candidates(self, model: Model) -> list[Model]:
        """The requested model first, then the rest of the chain after it (or all of it)."""
        refs = [m.ref for m in self.chain]
        if model.ref in refs:
            return [model, *self.chain[refs.index(model.ref) + 1 :]]
        return [model, *self.chain]

    def profiles_of(self, provider: str) -> list[ResolvedProfile | None]:
        return list(self.profiles.get(provider) or ()) or [None]

    def pick(
        self, provider: str, profiles: list[ResolvedProfile | None]
    ) -> tuple[ResolvedProfile | None, float] | None:
        """The next profile to use and how long to wait for it; None when all are disabled."""
        alive = [p for p in profiles if (provider, _name(p)) not in self.dead]
        if not alive:
            return None
        names = [_name(p) for p in alive]
        start = names.index(self.pinned[provider]) if self.pinned.get(provider) in names else 0
        ordered = alive[start:] + alive[:start]
        now = self.clock()
        waits = [self.cooldowns.remaining(provider, _name(p), now) for p in ordered]
        best = min(range(len(ordered)), key=lambda i: (waits[i] > 0, waits[i], i))
        return ordered[best], waits[best]

    async def wait(self, delay: float, signal: AbortSignal | None) -> bool:
        """Sleep ``delay`` seconds unless ``signal`` fires first; True if not aborted."""
        if signal is None:
            await self.sleep(delay)
            return True
        if signal.aborted:
            return False
        sleeper = asyncio.ensure_future(self.sleep(delay))
        watcher = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait({sleeper, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, watcher):
                task.cancel()
            await asyncio.gather(sleeper, watcher, return_exceptions=True)
        return not signal.aborted

    def options_for(
        self, options: StreamOptions, model: Model, primary: Model, profile: ResolvedProfile | None
    ) -> StreamOptions:
        if profile is not None:
            return replace(options, api_key=profile.api_key, base_url=profile.base_url or options.base_url)
        if model.provider != primary.provider:  # the caller's key and URL belong to the primary's provider
            return replace(options, api_key=None, base_url=None)
        return options

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        opts = options or StreamOptions()
        candidates = self.candidates(model)
        outcome = _Outcome()
        previous = model
        for index, candidate in enumerate(candidates):
            if index > 0 and not self.enter_fallback(previous, candidate, outcome.last_error):
                continue
            previous = candidate
            outcome = _Outcome(last_error=outcome.last_error)
            async for event in self.run_model(candidate, model, context, opts, outcome):
                yield event
            if outcome.finished:
                return
        if outcome.last_error is not None:
            yield outcome.last_error
        else:  # every fallback was skipped because the prompt does not fit it
            yield _failure(model, "context_overflow", "no model in the fallback chain can hold the prompt")

    def enter_fallback(self, previous: Model, candidate: Model, error: ErrorEvent | None) -> bool:
        """Emit the fallback event; False when ``candidate`` cannot hold the prompt (skipped)."""
        budget = self.budget_for(candidate) if self.budget_for is not None else None
        skipped = budget is not None and not budget.fits
        reason = (error.error.error_kind or "unknown") if error is not None else "unknown"
        self.emit(FallbackEvent(previous.ref, candidate.ref, reason, budget, skipped))
        return not skipped

    async def run_model(
        self, model: Model, primary: Model, context: Context, options: StreamOptions, outcome: _Outcome
    ) -> AsyncIterator[AssistantMessageEvent]:
        """Attempts on one model; yields what the consumer gets; sets ``outcome``."""
        profiles = self.profiles_of(model.provider)
        retries = 0
        while True:
            if options.signal is not None and options.signal.aborted:
                outcome.finished = True
                yield _aborted_event(model, "aborted before the model call")
                return
            pick = self.pick(model.provider, profiles)
            if pick is None:  # every profile was rejected as invalid in this run: fall back
                if outcome.last_error is None or retries == 0:
                    outcome.last_error = _failure(
                        model,
                        "auth_permanent",
                        f"every auth profile of provider {model.provider!r} was rejected as invalid earlier in this "
                        "run; fix or replace the API keys",
                    )
                return
            profile, delay = pick
            if delay > 0:
                if delay > self.limits.max_wait_s:  # too long to wait: fall back, or report why
                    outcome.last_error = _cooling_error(model, delay, outcome.last_error if retries else None)
                    return
                self.emit(WaitEvent(model.provider, _label(profile), model.ref, delay))
                if not await self.wait(delay, options.signal):
                    outcome.finished = True
                    yield _aborted_event(model, "aborted while waiting for an auth profile to cool down")
                    return
            attempt = _Attempt()
            call_options = self.options_for(options, model, primary, profile)
            async for event in self.attempt(model, context, call_options, _name(profile), attempt):
                yield event
            if attempt.error is None or not self.retryable(attempt.error, model, profile):
                if attempt.error is not None:
                    if attempt.held_start is not None:
                        yield attempt.held_start
                    yield attempt.error
                elif not attempt.failed_late:
                    self.cooldowns.record_success(model.provider, _name(profile))
                    self.pinned[model.provider] = _name(profile)
                outcome.finished = True
                return
            outcome.last_error = attempt.error
            retries += 1
            if retries > self.limits.max_retries:
                return
            self.emit_retry(retries, model, profile, attempt.error.error)

    def retryable(self, error: ErrorEvent, model: Model, profile: ResolvedProfile | None) -> bool:
        """Record the failure against the profile; True when another attempt may succeed."""
        message = error.error
        if error.reason == "aborted":
            return False
        if message.error_kind == "auth_permanent":
            self.dead.add((model.provider, _name(profile)))
            return True
        if message.error_kind in ROTATE_KINDS:
            self.cooldowns.record_failure(model.provider, _name(profile), self.clock(), message.retry_after)
            return True
        return False

    def emit_retry(self, attempt: int, model: Model, profile: ResolvedProfile | None, error: AssistantMessage) -> None:
        upcoming = self.pick(model.provider, self.profiles_of(model.provider))
        next_profile, delay = upcoming if upcoming is not None else (None, 0.0)
        self.emit(
            RetryEvent(
                attempt=attempt,
                profile=_label(profile),
                model=model.ref,
                error_kind=error.error_kind or "unknown",
                delay_s=delay,
                message=error.error_message or "",
                next_profile=_label(next_profile) if upcoming is not None else None,
            )
        )

    async def attempt(
        self, model: Model, context: Context, options: StreamOptions, profile: str, attempt: _Attempt
    ) -> AsyncIterator[AssistantMessageEvent]:
        """One call: pass events through once content flowed; capture an early error instead."""
        events = self.inner(model, context, options)
        try:
            async for event in events:
                if not attempt.streaming:
                    if isinstance(event, ErrorEvent):
                        attempt.error = event
                        return
                    if isinstance(event, StartEvent):
                        attempt.held_start = event
                        continue
                    attempt.streaming = True
                    if attempt.held_start is not None:
                        yield attempt.held_start
                if isinstance(event, ErrorEvent):
                    attempt.failed_late = True
                    if event.error.error_kind in ROTATE_KINDS:
                        # Too late to retry this call, but the next one should avoid this profile.
                        self.cooldowns.record_failure(model.provider, profile, self.clock(), event.error.retry_after)
                yield event
                if isinstance(event, (DoneEvent, ErrorEvent)):
                    return
        finally:
            closer = getattr(events, "aclose", None)
            if closer is not None:
                await closer()


@dataclass(slots=True)
class _Attempt:
    streaming: bool = False
    held_start: StartEvent | None = None
    error: ErrorEvent | None = None
    failed_late: bool = False


def _name(profile: ResolvedProfile | None) -> str:
    return profile.name if profile is not None else _DEFAULT_PROFILE


def _label(profile: ResolvedProfile | None) -> str | None:
    return profile.name if profile is not None else None


def failover_stream(
    models_chain: Sequence[Model],
    profiles_by_provider: Mapping[str, Sequence[ResolvedProfile]] | None = None,
    limits: EngineLimits | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
    *,
    inner: StreamFn | None = None,
    cooldowns: ProfileCooldowns | None = None,
    budget_for: Callable[[Model], TokenBudget] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> StreamFn:
    """A :data:`StreamFn` that adds profile rotation and model fallback around ``inner``.

    ``models_chain`` is the primary model followed by its fallbacks; a call for a model in
    the chain falls back to the models after it (a call for another model, to the whole
    chain). Profiles are per provider name; a provider without profiles uses the caller's
    options / environment key. ``budget_for(model)`` recomputes the token budget for a
    fallback model (e.g. ``ctx.token_budget.for_model``); a model the prompt cannot fit is
    skipped. Create one per run: disabled (``auth_permanent``) profiles stay disabled for it.
    """
    if not models_chain:
        raise ConfigError("failover needs at least one model in models_chain")
    for provider, profiles in (profiles_by_provider or {}).items():
        names = [p.name for p in profiles]
        if len(set(names)) != len(names):
            raise ConfigError(f"auth profile names for provider {provider!r} must be unique, got {names}")
    lim = limits or EngineLimits()
    failover = _Failover(
        models_chain,
        profiles_by_provider or {},
        lim,
        on_event,
        inner or _default_inner,
        cooldowns or SHARED_COOLDOWNS,
        budget_for,
        clock,
        sleep,
    )

    def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        return failover.stream(model, context, options)

    return stream
