"""``execute(ctx)``: run one :class:`AssembledContext` and get a handle to steer, abort and watch it.

This is the engine's execution core (seed 000): it wires the agent loop to failover (auth
profile rotation and model fallback), transcript repair, tool-result truncation,
compaction (proactive and on overflow), the streaming callbacks, and the Agents Ledger
(turn opened up front as a crash journal; the streaming reply, each finished message and
tool call journaled as they come; the final turn written in one transaction).
``Runtime.start`` (:mod:`nexus.engine.wiring.runtime`) is the front door built on it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nexus.agent import SteeringQueue, SteerMode, SteerReceipt
from nexus.config import ResolvedProfile
from nexus.engine.assembly._sessions import SessionCache
from nexus.engine.execution._run import EngineRun, EngineStreamEvent
from nexus.engine.execution._run_end import end_failed, failed_start
from nexus.engine.execution._run_trace import RunIdentity, listening, observed_run
from nexus.engine.execution._steering import steer_receipt
from nexus.engine.execution.callbacks import EngineCallbacks, callbacks_listener
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.events import EventChannel, ExecutionEvent, ExecutionState, RunEndEvent, Subscription
from nexus.engine.execution.failover import failover_stream
from nexus.engine.types import AgentResult, AssembledContext, EngineLimits, TokenBudget
from nexus.llm import AbortSignal, Model, StreamFn, StreamOptions, UserMessage, get_model

if TYPE_CHECKING:
    from nexus.engine.execution.scope import RunHost
    from nexus.ledger import Ledger

__all__ = ["EngineStreamEvent", "Execution", "build_run", "execute", "linked_signal"]


class Execution:
    """A run, from the moment it is started: ``await execution.result`` for the :class:`AgentResult`, and control.

    - ``abort(reason)``: stop it; once its turn is open, the turn is written ``aborted`` with the
      partial output (aborted while it waits for its session, nothing is written).
    - ``steer(message, id=..., mode=...)``: offer a user message for the next safe point (after
      the current tool batch, before the next model call); the :class:`SteerReceipt` ends
      ``delivered`` or ``returned`` (never lost; returned steers are also in the result). A run
      still ``starting`` keeps it for its first safe point.
    - ``state``: ``starting | streaming | tools | compacting | finishing | done``; ``await
      wait_state_change()`` or watch ``state`` events.
    - ``subscribe()`` / ``on_event(listener)``: the run's one event channel (see
      :mod:`nexus.engine.execution.events`), from the start (subscribe before the first ``await``
      to see every event); ``events()`` is ``subscribe()``.

    ``starting`` covers what happens before the model is called: waiting for the session's lock
    and assembling the context (``Runtime.start``); :func:`execute` starts from an assembled one.
    """

    __slots__ = ("_begun", "_channel", "_run", "_signal", "_steering", "_task", "_unlink", "agent_id", "events_shown",
                 "run_id", "session_label")  # fmt: skip

    def __init__(
        self,
        run_id: str,
        session_label: str,
        agent_id: str = "",
        *,
        signal: AbortSignal | None = None,
        steering: SteeringQueue | None = None,
    ) -> None:
        self.run_id = run_id
        self.session_label = session_label
        self.agent_id = agent_id
        self._channel = EventChannel(run_id, session_label, agent_id)
        self._steering = steering if steering is not None else SteeringQueue()
        self._signal, self._unlink = linked_signal(signal)
        self._run: EngineRun | None = None
        self._task: asyncio.Task[AgentResult] | None = None
        self._begun: asyncio.Future[None] | None = None  # made for a waiter only (most runs have none): 144 bytes
        self.events_shown: Callable[[], bool] | None = None
        """Set by whoever holds the run's right to speak for its session (the broker, under a session lease
        another process may take over): while it says False, :func:`nexus.streaming.stream_events` holds the
        run's events back (the lease may be gone; a new holder may be streaming the session already); what is
        held goes out once it says True again or the run's turn is written, and is dropped if the write fails."""

    def _drive(self, main: Coroutine[Any, Any, AgentResult]) -> None:
        """Run ``main`` as the execution's task (it starts at the caller's next ``await``: no event is missed).

        Every run starts here, so here it gets its span, metrics and log line (when anyone listens):
        from its start, the session's lock and the assembly included, to its result.
        """
        if listening():  # off: no identity and closure built for every run
            main = observed_run(main, RunIdentity(self.run_id, self.session_label, self.agent_id, lambda: self.context))
        # named by the run's id itself: a string of its own (``nexus-run-<id>``) was ~90 bytes more for every run
        self._task = asyncio.get_running_loop().create_task(self._to_the_end(main), name=self.run_id)

    async def _to_the_end(self, main: Coroutine[Any, Any, AgentResult]) -> AgentResult:
        """``main``, and an end announced for a run that did not announce its own: every run has one ``run_end``
        (a failure before the turn was written is stated in it, and still raised to the caller)."""
        result: AgentResult | None = None
        try:
            result = await main
            return result
        except BaseException as failure:
            if not self._channel.closed:
                self._end(None, failure)
            raise
        finally:
            self._unlink()  # a long-lived outer signal must not keep every finished run alive
            if not self._channel.closed:  # it never started (aborted while it waited for its session)
                self._end(result, None)
            self._wake_starters()

    def _end(self, result: AgentResult | None, failure: BaseException | None) -> None:
        """Announce the end of a run that did not (see ``_run_end``): steers offered meanwhile are handed back."""
        if self._run is not None and failure is not None:
            end_failed(self._run, failure)
            return
        self._steering.close("the run ended before it started")
        self._channel.publish(RunEndEvent(result if result is not None else failed_start(failure)))
        self._channel.close()

    def _attach(self, run: EngineRun) -> None:
        """The run is assembled and about to start: from now on the handle controls it."""
        self._run = run
        self._wake_starters()

    def _wake_starters(self) -> None:
        """The run got past its starting phase, or ended: wake :meth:`wait_started`'s waiters, if any."""
        begun, self._begun = self._begun, None
        if begun is not None and not begun.done():
            begun.set_result(None)

    def _publish(self, event: object) -> None:
        """Put an event of the starting phase (the session lock, recovered turns) on the channel."""
        self._channel.publish(event)

    @property
    def signal(self) -> AbortSignal:
        """The run's abort signal (aborted by :meth:`abort`, by the caller's signal, or by its timeout)."""
        return self._signal

    @property
    def result(self) -> asyncio.Task[AgentResult]:
        """The run's task; await it for the :class:`AgentResult` (ledger errors surface here)."""
        assert self._task is not None
        return self._task

    @property
    def started(self) -> bool:
        """True once the run got past its starting phase (the session's lock, the context assembled)."""
        return self._run is not None

    @property
    def context(self) -> AssembledContext | None:
        """What the model is told (``None`` while the run is starting): for auditing and tests."""
        return None if self._run is None else self._run.ctx

    @property
    def turn_id(self) -> str | None:
        """The ledger turn opened for this run (``None`` before it is opened or without a ledger)."""
        return None if self._run is None else self._run.turn_id

    @property
    def state(self) -> ExecutionState:
        """Where the run is (see the class docstring)."""
        run = self._run
        if run is None:
            return "done" if self._task is not None and self._task.done() else "starting"
        return run.state

    async def wait_started(self) -> bool:
        """Wait until the run is past its starting phase (``True``) or ended without starting (``False``)."""
        if self._run is None and not self._channel.closed:  # neither started nor ended (it closes the channel)
            if self._begun is None:
                self._begun = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._begun)
        return self._run is not None

    async def wait_state_change(self) -> ExecutionState:
        """Wait until ``state`` changes and return the new state (at once if the run is done)."""
        if self._run is None and not await self.wait_started():
            return self.state
        run = self._run
        assert run is not None  # started (wait_started said so)
        if run.state == "done":
            return "done"
        await run.state_change()
        return run.state

    @property
    def is_streaming(self) -> bool:
        """True while the run is active (between start and its final ledger write)."""
        return self._run is not None and self._run.active

    @property
    def is_compacting(self) -> bool:
        """True while the run summarises its history (steering is refused meanwhile)."""
        return self._run is not None and self._run.window.compacting

    def abort(self, reason: str = "aborted by the caller") -> None:
        """Abort the run; its partial output is kept and the turn is written ``aborted``."""
        self._signal.abort(reason)

    def steer(
        self, message: str | UserMessage, *, id: str | None = None, mode: SteerMode = "all", source: str = "steer"
    ) -> SteerReceipt:
        """Offer ``message`` for the next safe point; the receipt ends ``delivered`` or ``returned``.

        A returned steer (the run ended, failed, was aborted or is compacting) is the caller's again:
        requeue it. Returned steers are also listed in ``AgentResult.returned_steers``.
        ``mode="one"`` injects it alone at its safe point, ``"all"`` with every pending ``all`` steer.
        ``source`` is stored with the delivered message in the ledger (who sent it). A ``message`` that is
        neither text nor a ``UserMessage``, or a ``mode`` other than ``all``/``one``, raises here
        (``TypeError``/``ValueError``) and the run goes on.
        """
        run = self._run
        if run is None:  # still starting: the run takes it at its first safe point (or hands it back)
            return self._steering.offer(steer_receipt(message, id, mode, source))
        return run.steer(message, id=id, mode=mode, source=source)

    def on_event(self, listener: Callable[[ExecutionEvent], object]) -> Callable[[], None]:
        """Call ``listener`` with every event (in its envelope) from now on; returns an unsubscribe."""
        return self._channel.listen(listener)

    def subscribe(self, maxsize: int = 256) -> Subscription:
        """A bounded, non-blocking subscription to the events from now on (``async for`` it)."""
        return self._channel.subscribe(maxsize)

    def events(self, maxsize: int = 256) -> Subscription:
        """Same as :meth:`subscribe` (subscribe before awaiting the result to see every event)."""
        return self.subscribe(maxsize)

    def __await__(self):  # type: ignore[no-untyped-def]
        """``await execution`` is ``await execution.result``."""
        return self.result.__await__()


def _nothing() -> None:
    """The unlink of a run with no outer signal (one shared function, not a lambda per run)."""


def linked_signal(outer: AbortSignal | None) -> tuple[AbortSignal, Callable[[], None]]:
    """A run's own abort signal, aborted with ``outer`` (the caller's); and how to unlink them."""
    signal = AbortSignal()
    if outer is None:
        return signal, _nothing
    return signal, outer.add_listener(lambda: signal.abort(outer.reason or "aborted"))


def execute(
    ctx: AssembledContext,
    callbacks: EngineCallbacks | None = None,
    *,
    agent_id: str = "",
    steering: SteeringQueue | None = None,
    **services: Any,
) -> Execution:
    """Start running an assembled ``ctx`` as a task on the current event loop and return its handle.

    The engine core under ``Runtime.start`` (which also takes the session lock and assembles the
    context), for a context built by hand: ``services`` are :func:`build_run`'s (the ledger,
    ``stream_fn``, model and fallbacks, auth profiles, limits, cooldowns, options, depth, the
    runtime the run's tools may reach, the session cache). ``ctx.abort_signal`` aborts it.
    """
    execution = Execution(ctx.run_id, ctx.session_label, agent_id, signal=ctx.abort_signal, steering=steering)
    if callbacks is not None:
        execution.on_event(callbacks_listener(callbacks))
    run = build_run(ctx, execution, **services)
    execution._attach(run)
    execution._drive(run.main())
    return execution


def build_run(
    ctx: AssembledContext,
    execution: Execution,
    *,
    ledger: Ledger | None = None,
    stream_fn: StreamFn | None = None,
    model: Model | None = None,
    fallbacks: Sequence[Model] = (),
    auth_profiles: Mapping[str, Sequence[ResolvedProfile]] | None = None,
    limits: EngineLimits | None = None,
    cooldowns: ProfileCooldowns | None = None,
    options: StreamOptions | None = None,
    depth: int = 0,
    runtime: RunHost | None = None,
    cache: SessionCache | None = None,
) -> EngineRun:
    """The run of ``ctx`` for ``execution``: the provider call wrapped in failover, its channel and steering.

    ``stream_fn`` is the provider call (default ``nexus.llm.stream``; tests pass a
    ``ScriptedModel``'s); it is wrapped in :func:`failover_stream` with ``fallbacks`` and
    ``auth_profiles`` (per provider). ``model`` defaults to the catalog entry for
    ``ctx.provider``/``ctx.model``. With a ``ledger`` the run is journaled and written as a
    turn of ``ctx.session_label``; without one nothing is stored. ``depth`` is the sub-agent
    depth (0 for a top-level run); ``runtime`` lets the ``spawn_agent`` tool start workers;
    ``cache`` is the session's cache (a runtime's per-session state) the run may reuse and fill.
    """
    primary = model or get_model(ctx.provider, ctx.model)
    lim = limits or EngineLimits()
    hooks = _FailoverHooks(ctx, lim)
    wrapped = failover_stream(
        [primary, *fallbacks], auth_profiles, lim, hooks.on_engine_event, inner=stream_fn, cooldowns=cooldowns,
        budget_for=hooks.budget_for,
    )  # fmt: skip
    ctx.abort_signal = execution.signal
    run = EngineRun(
        ctx, execution._channel, ledger=ledger, model=primary, stream_fn=wrapped, limits=lim,
        options=options_for(ctx, options), depth=depth, runtime=runtime, cache=cache, steering=execution._steering,
    )  # fmt: skip
    hooks.run = weakref.ref(run)
    return run


class _FailoverHooks:
    """What a run's failover calls back into the run: the token budget for a fallback model, and engine events.

    One small object with two bound methods instead of two closures over a list (three cells, a list, two
    functions: about 400 bytes more for every run). The run is held weakly: the run holds the stream, a strong
    reference was a cycle.
    """

    __slots__ = ("ctx", "limits", "run")

    def __init__(self, ctx: AssembledContext, limits: EngineLimits) -> None:
        self.ctx = ctx
        self.limits = limits
        self.run: weakref.ref[EngineRun] | None = None

    def _the_run(self) -> EngineRun:
        run = self.run() if self.run is not None else None
        assert run is not None  # the stream is called by its run only
        return run

    def budget_for(self, candidate: Model) -> TokenBudget:
        run = self._the_run()
        current = run.window.budget(run.agent_ctx.messages)  # type: ignore[arg-type]
        return current.for_model(candidate, self.ctx.max_response_tokens, self.limits.reserve_tokens)

    def on_engine_event(self, event: object) -> None:
        self._the_run().engine_event(event)  # type: ignore[arg-type]


def options_for(ctx: AssembledContext, base: StreamOptions | None) -> StreamOptions:
    """The per-call options of a run: the caller's template plus the context's sampling settings.

    Built by the constructor, not ``dataclasses.replace`` (which walks the fields and their metadata
    on every run); a subclass of :class:`StreamOptions` still goes through ``replace`` to keep its own
    fields, and a test checks that every field of the template reaches the copy.
    """
    options = base or _DEFAULT_OPTIONS
    temperature = options.temperature if ctx.temperature is None else ctx.temperature
    max_tokens = ctx.max_response_tokens or options.max_tokens
    thinking = options.thinking if ctx.thinking_config is None else ctx.thinking_config.level
    session_id = options.session_id or ctx.session_label
    signal = options.signal if ctx.abort_signal is None else ctx.abort_signal  # the loop keeps these then
    if base is None:  # fresh defaults (its own ``headers`` dict), as ``StreamOptions()`` gave
        return StreamOptions(
            temperature=temperature, max_tokens=max_tokens, thinking=thinking, session_id=session_id, signal=signal
        )
    if type(options) is not StreamOptions:
        return replace(
            options, temperature=temperature, max_tokens=max_tokens, thinking=thinking, session_id=session_id,
            signal=signal,
        )  # fmt: skip
    return StreamOptions(
        temperature=temperature, max_tokens=max_tokens, thinking=thinking, tool_choice=options.tool_choice,
        api_key=options.api_key, base_url=options.base_url, headers=options.headers, timeout=options.timeout,
        signal=signal, session_id=session_id,
    )  # fmt: skip


_DEFAULT_OPTIONS = StreamOptions()
"""Read only: the template when a run is given none (its result is built fresh)."""
