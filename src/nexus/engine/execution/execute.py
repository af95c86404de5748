"""``execute(ctx)``: run one :class:`AssembledContext` and get a handle to steer, abort and watch it.

This is the engine's execution core (seed 000): it wires the agent loop to failover (auth
profile rotation and model fallback), transcript repair, tool-result truncation,
compaction (proactive and on overflow), the streaming callbacks, and the Agents Ledger
(turn opened up front as a crash journal; the streaming reply, each finished message and
tool call journaled as they come; the final turn written in one transaction).
``run_agent`` in :mod:`nexus.engine.wiring.runner` is the one-call form built on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from nexus.agent.steering import SteeringQueue, SteerMode, SteerReceipt
from nexus.config._profile import ResolvedProfile
from nexus.engine.assembly._sessions import SessionCache
from nexus.engine.execution._run import EngineRun, EngineStreamEvent
from nexus.engine.execution._run_trace import RunIdentity, observed_run
from nexus.engine.execution.callbacks import EngineCallbacks, callbacks_listener
from nexus.engine.execution.events import EventChannel, ExecutionEvent, ExecutionState, Subscription
from nexus.engine.execution.failover import ProfileCooldowns, failover_stream
from nexus.engine.types import AgentResult, AssembledContext, EngineLimits, TokenBudget
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.types import Model, UserMessage

if TYPE_CHECKING:
    from nexus.engine.execution.scope import RunHost
    from nexus.ledger import Ledger

__all__ = ["EngineExecution", "EngineStreamEvent", "Execution", "execute"]


class Execution:
    """A running execution: ``await execution.result`` for the :class:`AgentResult`, and control meanwhile.

    - ``abort(reason)``: stop streaming and tools; the turn is written ``aborted`` with the partial output.
    - ``steer(message, id=..., mode=...)``: offer a user message for the next safe point (after
      the current tool batch, before the next model call); the :class:`SteerReceipt` ends
      ``delivered`` or ``returned`` (never lost; returned steers are also in the result).
    - ``state``: ``starting | streaming | tools | compacting | finishing | done``; ``await
      wait_state_change()`` or watch ``state`` events.
    - ``subscribe()`` / ``on_event(listener)``: the run's one event channel (see
      :mod:`nexus.engine.execution.events`); ``events()`` is ``subscribe()`` for ``async for``.
    """

    __slots__ = ("_run", "_task")

    def __init__(self, run: EngineRun, task: asyncio.Task[AgentResult]) -> None:
        self._run = run
        self._task = task

    @property
    def result(self) -> asyncio.Task[AgentResult]:
        """The run's task; await it for the :class:`AgentResult` (ledger errors surface here)."""
        return self._task

    @property
    def run_id(self) -> str:
        """The run's id (``AssembledContext.run_id``)."""
        return self._run.ctx.run_id

    @property
    def session_label(self) -> str:
        """The session this run writes to."""
        return self._run.ctx.session_label

    @property
    def turn_id(self) -> str | None:
        """The ledger turn opened for this run (``None`` before it is opened or without a ledger)."""
        return self._run.turn_id

    @property
    def state(self) -> ExecutionState:
        """Where the run is (see the class docstring)."""
        return self._run.state

    async def wait_state_change(self) -> ExecutionState:
        """Wait until ``state`` changes and return the new state (at once if the run is done)."""
        if self._run.state == "done":
            return "done"
        await self._run.state_changed.wait()
        return self._run.state

    @property
    def is_streaming(self) -> bool:
        """True while the run is active (between start and its final ledger write)."""
        return self._run.active

    @property
    def is_compacting(self) -> bool:
        """True while the run summarises its history (steering is refused meanwhile)."""
        return self._run.window.compacting

    def abort(self, reason: str = "aborted by the caller") -> None:
        """Abort the run; its partial output is kept and the turn is written ``aborted``."""
        self._run.signal.abort(reason)

    def steer(
        self, message: str | UserMessage, *, id: str | None = None, mode: SteerMode = "all", source: str = "steer"
    ) -> SteerReceipt:
        """Offer ``message`` for the next safe point; the receipt ends ``delivered`` or ``returned``.

        A returned steer (the run ended, failed, was aborted or is compacting) is the caller's
        again: requeue it. Returned steers are also listed in ``AgentResult.returned_steers``.
        ``mode="one"`` injects it alone at its safe point, ``"all"`` with every pending ``all`` steer.
        ``source`` is stored with the delivered message in the ledger (who sent it).
        """
        return self._run.steer(message, id=id, mode=mode, source=source)

    def on_event(self, listener: Callable[[ExecutionEvent], object]) -> Callable[[], None]:
        """Call ``listener`` with every event (in its envelope) from now on; returns an unsubscribe."""
        return self._run.channel.listen(listener)

    def subscribe(self, maxsize: int = 256) -> Subscription:
        """A bounded, non-blocking subscription to the events from now on (``async for`` it)."""
        return self._run.channel.subscribe(maxsize)

    def events(self, maxsize: int = 256) -> Subscription:
        """Same as :meth:`subscribe` (subscribe before awaiting the result to see every event)."""
        return self.subscribe(maxsize)

    def __await__(self):  # type: ignore[no-untyped-def]
        """``await execution`` is ``await execution.result``."""
        return self._task.__await__()


EngineExecution = Execution
"""The former name of :class:`Execution` (the same class)."""


def execute(
    ctx: AssembledContext,
    callbacks: EngineCallbacks | None = None,
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
    env: RunHost | None = None,
    cache: SessionCache | None = None,
    agent_id: str = "",
    steering: SteeringQueue | None = None,
) -> Execution:
    """Start running ``ctx`` as a task on the current event loop and return its handle.

    ``stream_fn`` is the provider call (default ``nexus.llm.stream``; tests pass a
    ``ScriptedModel``'s); it is wrapped in :func:`failover_stream` with ``fallbacks`` and
    ``auth_profiles`` (per provider). ``model`` defaults to the catalog entry for
    ``ctx.provider``/``ctx.model``. With a ``ledger`` the run is journaled and written as a
    turn of ``ctx.session_label``; without one nothing is stored. ``depth`` is the sub-agent
    depth (0 for a top-level run); ``env`` lets the ``spawn_agent`` tool start workers;
    ``cache`` is the session's cache (a runtime's per-session state) the run may reuse and fill.
    """
    from nexus.llm.catalog import get_model

    primary = model or get_model(ctx.provider, ctx.model)
    lim = limits or EngineLimits()
    holder: list[EngineRun] = []

    def budget_for(candidate: Model) -> TokenBudget:
        run = holder[0]
        current = run.window.budget(run.agent_ctx.messages)  # type: ignore[arg-type]
        return current.for_model(candidate, ctx.max_response_tokens, lim.reserve_tokens)

    def on_engine_event(event: object) -> None:
        holder[0].engine_event(event)  # type: ignore[arg-type]

    wrapped = failover_stream(
        [primary, *fallbacks],
        auth_profiles,
        lim,
        on_engine_event,
        inner=stream_fn,
        cooldowns=cooldowns,
        budget_for=budget_for,
    )
    channel = EventChannel(ctx.run_id, ctx.session_label, agent_id)
    if callbacks is not None:
        channel.listen(callbacks_listener(callbacks))
    run = EngineRun(
        ctx,
        channel,
        ledger=ledger,
        model=primary,
        stream_fn=wrapped,
        limits=lim,
        options=options_for(ctx, options),
        depth=depth,
        env=env,
        cache=cache,
        steering=steering,
    )
    holder.append(run)
    # the run's span, metrics and log line, when anyone listens
    main = observed_run(run.main(), RunIdentity(ctx.run_id, ctx.session_label, agent_id, lambda: ctx))
    task = asyncio.get_running_loop().create_task(main, name=f"nexus-run-{ctx.run_id}")
    return Execution(run, task)


def options_for(ctx: AssembledContext, base: StreamOptions | None) -> StreamOptions:
    """The per-call options of a run: the caller's template plus the context's sampling settings."""
    options = base or StreamOptions()
    thinking = ctx.thinking_config.level if ctx.thinking_config is not None else options.thinking
    return replace(
        options,
        temperature=ctx.temperature if ctx.temperature is not None else options.temperature,
        max_tokens=ctx.max_response_tokens or options.max_tokens,
        thinking=thinking,
        session_id=options.session_id or ctx.session_label,
    )
