"""Auth-profile rotation and model fallback, as a wrapper around a :data:`StreamFn` (seed 001).

:func:`failover_stream` returns a stream function the agent loop calls like any other.
Per call it tries the current model with the provider's auth profiles: on a
``rate_limit``/``overloaded``/``timeout``/``network`` error the profile cools down (1 s,
doubling to 60 s, or the server's ``retry_after`` when longer; reset on success) and the
next ready profile is tried; ``auth``, ``auth_permanent`` and ``billing`` disable the
profile for the run (the same key would be refused again); when every profile cools down
it waits for the soonest (abortable), unless that is longer than ``max_wait_s``: then it
does not retry, and the error says how long and until when. A local server (loopback)
that refuses or drops the connection gets one quick retry (``QUICK_RETRY_S``), not the
backoff: it is down, not busy. After ``max_retries`` retries it moves down the model
fallback chain.

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
from dataclasses import replace
from types import MappingProxyType

from nexus._dataclass import dataclass
from nexus.config import ResolvedProfile
from nexus.engine.execution._failover_errors import cooling_error, failure, refused_error, too_long_error, until
from nexus.engine.execution._run_trace import record_failover
from nexus.engine.execution.cooldowns import SHARED_COOLDOWNS, ProfileCooldowns
from nexus.engine.types import EngineEvent, EngineLimits, FallbackEvent, RetryEvent, TokenBudget, WaitEvent
from nexus.errors import ConfigError
from nexus.llm import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    ErrorKind,
    Model,
    StartEvent,
    StreamFn,
    StreamOptions,
    effective_base_url,
    is_local_url,
    resolve_api,
)

ROTATE_KINDS: frozenset[ErrorKind] = frozenset({"auth", "rate_limit", "billing", "overloaded", "timeout", "network"})
"""Error kinds that put the profile in cooldown and try again (another profile, later, or another model)."""

_DROP_KINDS: frozenset[ErrorKind] = frozenset({"auth", "auth_permanent", "billing"})
"""Error kinds that take the profile out of the run: another key may work, the same one will not."""

_DEFAULT_PROFILE = "(default)"

QUICK_RETRY_S = 0.2
"""Pause before retrying a local server (loopback) that refused or dropped the connection."""

LOCAL_NETWORK_RETRIES = 1
"""Retries after a connection failure to a local server: one, quick; it is down, not busy."""


def _default_inner(
    model: Model, context: Context, options: StreamOptions | None
) -> AsyncIterator[AssistantMessageEvent]:
    """``nexus.llm.stream`` when available, else the provider registered for ``model.api``: its own stream,
    which the attempt closes. (A generator relaying it here was closed, but left the provider's stream to the
    garbage collector: collected as a program ended, its close was cancelled and it answered with an error event,
    "async generator ignored GeneratorExit" on stderr — trial15 D13, after ``compact_session``.)"""
    module = importlib.import_module("nexus.llm")
    fn: StreamFn = getattr(module, "stream", None) or resolve_api(model.api)
    return fn(model, context, options)


def _aborted_event(model: Model, why: str) -> ErrorEvent:
    message = AssistantMessage(
        api=model.api, provider=model.provider, model=model.id, stop_reason="aborted", error_message=why
    )
    return ErrorEvent("aborted", message)


@dataclass(slots=True)
class _Call:
    """The failover state of one model call: the model tried now, its retries, and the attempt streaming now.

    One slotted object a call: the attempts and the fallbacks are steps of one generator (``_Failover.stream``),
    not generators nested in it that every streamed event went through (and that each held a frame per run).
    """

    requested: Model
    options: StreamOptions
    candidates: Sequence[Model]
    previous: Model
    index: int = -1
    model: Model | None = None  # the model tried now; None: go down the chain
    profiles: Sequence[ResolvedProfile | None] = ()  # its provider's, as picked from
    last_error: ErrorEvent | None = None
    retries: int = 0
    local_network_failures: int = 0
    announced: bool = False  # the coming wait was announced by the last RetryEvent
    profile: ResolvedProfile | None = None  # the attempt's (from here on: the attempt streaming now)
    call_options: StreamOptions | None = None
    local: bool = False
    streaming: bool = False
    held_start: StartEvent | None = None
    error: ErrorEvent | None = None


class _Failover:
    """The state of one run's failover: disabled profiles and the profile pinned per provider."""

    __slots__ = ("budget_for", "chain", "clock", "cooldowns", "dead", "inner", "limits", "on_event", "pinned",
                 "profiles", "sleep", "wall_clock")  # fmt: skip

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
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.chain = tuple(chain)
        self.profiles = profiles
        self.limits = limits
        self.on_event = on_event
        self.inner = inner
        self.cooldowns = cooldowns
        self.budget_for = budget_for
        self.clock = clock
        self.sleep = sleep
        self.wall_clock = wall_clock
        # made on first use: most runs never lose a profile and have none to pin (two empty dicts a run)
        self.dead: dict[tuple[str, str], ErrorKind] | None = None  # profile -> why it is out of the run
        self.pinned: dict[str, str] | None = None

    def emit(self, event: EngineEvent) -> None:
        record_failover(event)  # a metric, an event on the run's span, a log line
        if self.on_event is not None:
            self.on_event(event)

    def candidates(self, model: Model) -> Sequence[Model]:
        """The requested model first, then the rest of the chain after it (or all of it)."""
        if model is self.chain[0]:  # the usual call: the chain itself (not a copy held by every call)
            return self.chain
        refs = [m.ref for m in self.chain]
        if model.ref in refs:
            return [model, *self.chain[refs.index(model.ref) + 1 :]]
        return [model, *self.chain]

    def profiles_of(self, provider: str) -> Sequence[ResolvedProfile | None]:
        return self.profiles.get(provider) or _NO_PROFILE

    def pick(
        self, provider: str, profiles: Sequence[ResolvedProfile | None]
    ) -> tuple[ResolvedProfile | None, float] | None:
        """The next profile to use and how long to wait for it; None when all are disabled."""
        dead = self.dead
        alive = profiles if dead is None else [p for p in profiles if (provider, _name(p)) not in dead]
        if not alive:
            return None
        names = [_name(p) for p in alive]
        pinned = None if self.pinned is None else self.pinned.get(provider)
        start = names.index(pinned) if pinned in names else 0
        ordered = [*alive[start:], *alive[:start]]
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
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        """The call of ``model`` with rotation, retries and fallback: one generator for all of its attempts.

        Only an attempt's events pass through here; what to try next is decided by plain methods between them.
        """
        call = _Call(model, options or StreamOptions(), self.candidates(model), model)
        while (ready := await self.next_attempt(call)) is not None:
            if isinstance(ready, ErrorEvent):  # aborted before or while waiting for the attempt
                yield ready
                return
            candidate, profile = ready, _name(call.profile)
            events = self.inner(candidate, context, call.call_options or call.options)
            try:
                async for event in events:
                    if not call.streaming:  # nothing reached the consumer yet: an error may still be retried
                        if isinstance(event, ErrorEvent):
                            call.error = event
                            break
                        if isinstance(event, StartEvent):
                            call.held_start = event
                            continue
                        call.streaming = True
                        if call.held_start is not None:
                            yield call.held_start
                    if isinstance(event, ErrorEvent):
                        if event.error.error_kind in ROTATE_KINDS:  # too late to retry; the next call avoids it
                            self.record(candidate.provider, profile, event.error, call.local)
                    elif isinstance(event, DoneEvent):  # now: consumers stop reading at `done` and close the stream
                        self.succeeded(candidate.provider, profile)
                    yield event
                    if isinstance(event, (DoneEvent, ErrorEvent)):
                        return
                else:  # a stream that ended without `done` or an error: as at `done`
                    self.succeeded(candidate.provider, profile)
            finally:  # closed here, not by asyncio's finalizer hook for abandoned generators
                closer = getattr(events, "aclose", None)
                if closer is not None:
                    await closer()
            if call.error is None or not self.retryable(call.error, candidate, call.profile, call.local):
                if call.error is not None:
                    if call.held_start is not None:
                        yield call.held_start
                    yield call.error
                return
            call.last_error = call.error
            if not self.plan_retry(call, candidate, call.error):
                call.model = None  # fall back
        yield call.last_error or failure(
            model, "context_overflow", "no model in the fallback chain can hold the prompt"
        )

    async def next_attempt(self, call: _Call) -> Model | ErrorEvent | None:
        """The model of the next attempt (its profile set in ``call``), the aborted event that ends the call, or
        None when the fallback chain is used up."""
        while True:
            if call.model is None and not self.next_model(call):
                return None
            assert call.model is not None
            ready = await self.ready(call, call.model)
            if ready is not None:
                return ready
            call.model = None  # this model is out of attempts: the next in the chain

    def next_model(self, call: _Call) -> bool:
        """Move ``call`` down the chain to the next model that can hold the prompt; False at its end."""
        while call.index + 1 < len(call.candidates):
            call.index += 1
            candidate = call.candidates[call.index]
            if call.index > 0 and not self.enter_fallback(call.previous, candidate, call.last_error):
                continue
            call.previous = call.model = candidate
            call.profiles = self.profiles_of(candidate.provider)
            call.retries = call.local_network_failures = 0
            call.announced = False
            return True
        return False

    async def ready(self, call: _Call, model: Model) -> Model | ErrorEvent | None:
        """Pick the profile of ``model``'s next attempt and wait for it to cool down: ``model`` when ready, an
        aborted event, or None when ``model`` gets no more attempts (``call.last_error`` says why).

        Every wait is announced once: by the ``RetryEvent`` of the failure that caused it, or
        (for a cooldown left by an earlier call) by a ``WaitEvent``.
        """
        signal, profiles = call.options.signal, call.profiles
        if signal is not None and signal.aborted:
            return _aborted_event(model, "aborted before the model call")
        pick = self.pick(model.provider, profiles)
        if pick is None:  # every profile was refused in this run: fall back
            if call.last_error is None or call.retries == 0:
                call.last_error = self.refused_error(model, profiles)
            return None
        profile, delay = pick
        if delay > 0:
            if not call.announced:
                if delay > self.limits.max_wait_s:  # cooling since an earlier call, for too long
                    kind = self.cooldowns.last_kind(model.provider, _name(profile))
                    call.last_error = cooling_error(model, delay, kind, until(self.wall_clock(), delay))
                    return None
                self.emit(WaitEvent(model.provider, _label(profile), model.ref, delay, keys=len(profiles)))
            if not await self.wait(delay, signal):
                return _aborted_event(model, "aborted while waiting for an auth profile to cool down")
        call.announced = call.streaming = False
        call.profile, call.held_start, call.error = profile, None, None
        call.call_options = self.options_for(call.options, model, call.requested, profile)
        call.local = is_local_url(effective_base_url(model, call.call_options) or "")
        return model

    def enter_fallback(self, previous: Model, candidate: Model, error: ErrorEvent | None) -> bool:
        """Emit the fallback event; False when ``candidate`` cannot hold the prompt (skipped)."""
        budget = self.budget_for(candidate) if self.budget_for is not None else None
        skipped = budget is not None and not budget.fits
        reason = (error.error.error_kind or "unknown") if error is not None else "unknown"
        self.emit(FallbackEvent(previous.ref, candidate.ref, reason, budget, skipped))
        return not skipped

    def succeeded(self, provider: str, profile: str) -> None:
        """The profile answered: reset its backoff and try it first on the provider's next call."""
        self.cooldowns.record_success(provider, profile)
        if len(self.profiles.get(provider) or ()) > 1:  # one profile or none: nothing to choose between
            if self.pinned is None:
                self.pinned = {}
            self.pinned[provider] = profile

    def refused_error(self, model: Model, profiles: Sequence[ResolvedProfile | None]) -> ErrorEvent:
        """Every key of ``model``'s provider was refused earlier in this run."""
        dead = self.dead or {}
        return refused_error(model, [dead.get((model.provider, _name(p)), "auth_permanent") for p in profiles])

    def plan_retry(self, call: _Call, model: Model, error: ErrorEvent) -> bool:
        """Decide whether ``model`` gets another attempt after ``error``; announce it if so.

        No retry (False) after ``max_retries``, when no profile is left, after a second
        connection failure to a local server (it is not running: waiting will not start
        it), or when the next attempt would wait longer than ``max_wait_s`` (the error
        then says how long and until when).
        """
        call.retries += 1
        kind = error.error.error_kind
        if kind == "network" and call.local:
            call.local_network_failures += 1
        if call.retries > self.limits.max_retries or call.local_network_failures > LOCAL_NETWORK_RETRIES:
            return False
        upcoming = self.pick(model.provider, self.profiles_of(model.provider))
        if upcoming is None:
            return False
        next_profile, delay = upcoming
        if delay > self.limits.max_wait_s:
            when = until(self.wall_clock(), delay)
            call.last_error = too_long_error(error, delay, self.limits.max_wait_s, when)
            return False
        self.emit(
            RetryEvent(
                attempt=call.retries,
                profile=_label(call.profile),
                model=model.ref,
                error_kind=kind or "unknown",
                delay_s=delay,
                message=error.error.error_message or "",
                next_profile=_label(next_profile),
            )
        )
        call.announced = delay > 0
        return True

    def retryable(self, error: ErrorEvent, model: Model, profile: ResolvedProfile | None, local: bool) -> bool:
        """Record the failure against the profile; True when another attempt may succeed.

        ``auth``, ``auth_permanent`` and ``billing`` take the profile out of this run (the
        same key would be refused again: waiting adds no credit); the other rotating kinds
        put it in cooldown.
        """
        message = error.error
        if error.reason == "aborted":
            return False
        if message.error_kind in _DROP_KINDS:
            if self.dead is None:
                self.dead = {}
            self.dead[(model.provider, _name(profile))] = message.error_kind or "auth"
            return True
        if message.error_kind in ROTATE_KINDS:
            self.record(model.provider, _name(profile), message, local)
            return True
        return False

    def record(self, provider: str, profile: str, message: AssistantMessage, local: bool) -> None:
        """Cool the profile down after ``message``'s failure (briefly for a local connection failure)."""
        kind = message.error_kind
        quick = QUICK_RETRY_S if kind == "network" and local else None
        self.cooldowns.record_failure(provider, profile, self.clock(), message.retry_after, kind=kind, delay=quick)


def _name(profile: ResolvedProfile | None) -> str:
    return profile.name if profile is not None else _DEFAULT_PROFILE


def _label(profile: ResolvedProfile | None) -> str | None:
    return profile.name if profile is not None else None


_NO_PROFILE: tuple[None] = (None,)
"""The profiles of a provider without any: the caller's options / environment key."""

_NO_PROFILES: Mapping[str, Sequence[ResolvedProfile]] = MappingProxyType({})
"""Read only: the profiles of a run given none (not a fresh empty dict each run)."""


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
    wall_clock: Callable[[], float] = time.time,
) -> StreamFn:
    """A :data:`StreamFn` that adds profile rotation and model fallback around ``inner``.

    ``models_chain`` is the primary model followed by its fallbacks; a call for a model in
    the chain falls back to the models after it (a call for another model, to the whole
    chain). Profiles are per provider name; a provider without profiles uses the caller's
    options / environment key. ``budget_for(model)`` recomputes the token budget for a
    fallback model (e.g. ``ctx.token_budget.for_model``); a model the prompt cannot fit is
    skipped. Create one per run: disabled (``auth``/``auth_permanent``) profiles stay disabled
    for it. ``clock`` times cooldowns; ``wall_clock`` (Unix time) only words "until 10:32 UTC".
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
        profiles_by_provider or _NO_PROFILES,
        lim,
        on_event,
        inner or _default_inner,
        cooldowns or SHARED_COOLDOWNS,
        budget_for,
        clock,
        sleep,
        wall_clock,
    )
    return failover.stream  # the bound method, not a closure around it (a function and a cell fewer a run)
