"""``Runtime`` (what a process has once) + ``AgentSpec`` (one agent) → ``runtime.start(...)`` → ``Execution``.

What a process has once — the config, the ledger, the provider call, auth-profile cooldowns, the
resolved model catalog, the coding tools, the per-session state (bounded by bytes) and the
:class:`Spawner` — lives on one :class:`Runtime`. What an agent *is* is an
:class:`~nexus.engine.types.AgentSpec`. ``runtime.start(spec, session, message)`` is the one way a
run starts, for the CLI, the broker, spawned workers and the server alike: it checks the model
(a :class:`~nexus.errors.ConfigError` before anything is written) and returns the
:class:`Execution` at once, whose task then takes the session's lock (one run per session, also
across processes), assembles the context from the ledger and runs it.
:func:`~nexus.engine.wiring.run_agent.run_agent` is the one-call form. See docs/engine.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Unpack

from nexus._dataclass import dataclass
from nexus.config import prompt_profile, provider_settings
from nexus.engine.assembly import budget
from nexus.engine.assembly._sessions import DEFAULT_MAX_BYTES, SessionStates
from nexus.engine.assembly.bootstrap import scaffold_workspace
from nexus.engine.assembly.context import EventContext, PromptOptions, assemble_context, build_current_message
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.execute import Execution, build_run
from nexus.engine.execution.session_lock import run_lock
from nexus.engine.types import (
    AgentResult,
    AgentRole,
    AgentSpec,
    AssembledContext,
    EngineLimits,
    ThinkingConfig,
    new_id,
)
from nexus.engine.wiring._labels import SessionLabels, label_now
from nexus.engine.wiring._start import (
    StartRequest,
    aborted_before_start,
    admitted,
    answered_before_start,
    check_start,
)
from nexus.engine.wiring.models import limits_from_config, preflight, resolve_model, unreachable_model_problem
from nexus.engine.wiring.spawn import SPAWN_TOOL_NAME, EngineSpawner, Spawner, spawn_agent_tool
from nexus.ledger import DEFAULT_SESSION, TurnNotSavedError
from nexus.llm import ImageContent, Model, StreamFn, StreamOptions, UserMessage, add_secrets

if TYPE_CHECKING:
    from collections.abc import Callable

    from nexus.agent import AgentTool
    from nexus.config import NexusConfig, ResolvedProfile
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.engine.types import EngineEvent
    from nexus.engine.wiring._start import StartOptions
    from nexus.engine.wiring.compact_session import SessionCompaction
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal
    from nexus.mcp import McpServers

log = logging.getLogger("nexus.engine")

_LIVE_PRUNE = 64
"""Finished executions are dropped from :meth:`Runtime.live`'s table when it reaches this size, and then whenever it
has doubled since (a run leaves the table as it ends: the sweep is for one whose task never ran)."""

_FROM_CONFIG = EngineLimits()
"""The default of ``Runtime.limits``: replaced by the config's ``[agent]`` limits (compared by identity)."""


@dataclass(slots=True, eq=False)
class Runtime:
    """The process-wide services every execution shares (one per process); see the module docstring.

    ``stream_fn`` replaces the provider call (tests: a ``ScriptedModel``'s; model checks are then
    skipped); ``tools`` replaces the coding tools (the policy still applies); ``limits`` defaults
    to the config's ``[agent]`` table; ``session_bytes`` bounds the per-session state.
    """

    config: NexusConfig
    ledger: Ledger
    stream_fn: StreamFn | None = None
    cooldowns: ProfileCooldowns = field(default_factory=ProfileCooldowns)
    tools: Sequence[AgentTool] | None = None
    spawner: Spawner = field(default_factory=EngineSpawner)
    """Who runs ``spawn_agent`` workers (the engine's own by default; the broker installs its own)."""
    limits: EngineLimits = field(default=_FROM_CONFIG)
    sessions: SessionStates = field(default_factory=lambda: SessionStates(DEFAULT_MAX_BYTES))
    on_start: Callable[[Execution], object] | None = None
    """Told of every run this runtime starts, before it runs (a process's live view of its runs: the
    server's event log). Nothing else watches all runs: a run's starter holds its execution."""
    unsaved: list[str] = field(default_factory=list)
    """Turns of this process whose final write failed (kept in rescue files): the next run of their
    session puts them in the ledger before it reads the head, so a conversation that goes on does not fork."""
    _models: dict[str, Model] = field(default_factory=dict, repr=False)
    mcp: McpServers | None = None
    """The MCP servers of ``[mcp.servers]`` (one connection each, shared by every run); made from the config."""
    _coding_tools: list[AgentTool] | None = field(default=None, repr=False)
    _live: dict[str, Execution] = field(default_factory=dict, repr=False)
    _prune_at: int = field(default=_LIVE_PRUNE, repr=False)
    _labels: SessionLabels = field(default_factory=SessionLabels, repr=False)
    _owns_ledger: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.limits is _FROM_CONFIG or self.limits is None:
            self.limits = limits_from_config(self.config)
        if self.mcp is None and self.config.mcp.enabled():  # no server, no module: most runs
            from nexus.engine.wiring.mcp_tools import mcp_servers_for

            self.mcp = mcp_servers_for(self.config)

    @classmethod
    async def open(cls, config: NexusConfig | None = None, **kwargs: object) -> Runtime:
        """A runtime on ``$NEXUS_HOME``'s nexus.toml and its ledger (agents.db, or the ``database`` URL);
        closes turns a crashed process left open."""
        from nexus.ledger import Ledger

        if config is None:
            config = _load_config()
        ledger = await Ledger.connect(config.database_target)
        try:
            await ledger.turns.recover()
            runtime = cls(config, ledger, **kwargs)  # type: ignore[arg-type]
        except BaseException:
            await ledger.aclose()
            raise
        runtime._owns_ledger = True
        return runtime

    async def aclose(self) -> None:
        """Stop the MCP servers this runtime started; close the ledger if :meth:`open` opened it."""
        if self.mcp is not None:
            await self.mcp.close()
        if self._owns_ledger:
            await self.ledger.aclose()

    # ------------------------------------------------------------------ models

    def model(self, ref: str | Model | None = None) -> Model:
        """The model for ``ref`` (a ``Model`` is used as is; ``None`` = the configured default).

        Resolved models are kept for the life of the runtime (its catalog): the default is decided
        once (it looks at keys and the local model's files), not on every run.
        """
        if isinstance(ref, Model):
            return ref
        key = ref or ""
        found = self._models.get(key)
        if found is None:
            if ref is None:
                from nexus.config import resolve_default_model

                found = self.model(resolve_default_model(self.config).ref)
            else:
                found = resolve_model(self.config, ref)
            self._models[key] = found
        return found

    def fallback_models(self, primary: Model, refs: Sequence[str] | None = None) -> list[Model]:
        """The fallback chain (``refs``, else the config's ``fallbacks``) as models, without ``primary``."""
        chain = self.config.fallbacks if refs is None else refs
        return [self.model(ref) for ref in chain if ref != primary.ref]

    def preflight(self, primary: Model, fallbacks: Sequence[str] | None = None) -> None:
        """:func:`~nexus.engine.wiring.models.preflight` for ``primary`` and its fallbacks (skipped with a
        custom ``stream_fn``)."""
        if self.stream_fn is None:
            preflight(self.config, primary, self.fallback_models(primary, fallbacks))

    def model_problem(self, ref: str) -> str | None:
        """Why no run could reach model ``ref`` (the check before an agent is registered with it), or ``None``.

        With a custom ``stream_fn`` (tests, embedding) any model is fine, as for the pre-flight.
        """
        return None if self.stream_fn is not None else unreachable_model_problem(self.config, ref)

    def auth_profiles(self, models: Sequence[Model]) -> dict[str, list[ResolvedProfile]]:
        """Each provider's usable keys from config/environment, in rotation order.

        The keys are registered with :func:`nexus.llm.redact.add_secrets`: no error text repeats one.
        """
        out: dict[str, list[ResolvedProfile]] = {}
        for provider in dict.fromkeys(m.provider for m in models):
            settings = provider_settings(self.config, provider)
            usable = [p for p in settings.profiles if p.api_key is not None]
            for p in settings.profiles:
                if p.api_key is None:
                    log.warning("auth profile %s of %s skipped: %s is not set", p.name, provider, ", ".join(p.missing))
            if usable:
                out[provider] = usable
                add_secrets(p.api_key for p in usable)
        return out

    def chat_only(self, model: Model) -> bool:
        """True for the bundled SmolLM2-135M: it cannot use tools (it picks wrong ones and loops).

        Offering them would also cost ~1.4k of its 4k context and force non-streamed generation,
        so it runs as a plain chat model. A GGUF configured with ``local.model_path`` gets tools.
        """
        return model.api == "llama-cpp" and self.config.local.model_path is None

    # ------------------------------------------------------------------ tools and context

    def tools_for(
        self, session_label: str, role: AgentRole, depth: int, extra: Sequence[AgentTool] = ()
    ) -> list[AgentTool]:
        """The tools this session/role may use: coding tools (or ``tools``), ``spawn_agent`` while the
        depth allows, the MCP servers' listed tools (started by :meth:`prepare_tools`), and ``extra``
        (e.g. the broker's agent tools), all by the config's policy."""
        if self.tools is not None:
            candidates = list(self.tools)
        else:
            if self._coding_tools is None:
                from nexus.tools import coding_tools

                self._coding_tools = coding_tools(
                    self.config.workspace_path, bash_timeout=self.config.agent.bash_timeout_s
                )
            candidates = list(self._coding_tools)
        if depth < self.limits.subagent_max_depth and all(t.name != SPAWN_TOOL_NAME for t in candidates):
            candidates.append(spawn_agent_tool())
        if self.mcp is not None:
            candidates += self.mcp.tools()
        candidates += extra
        policy = self.config.tools
        if not policy.restricts():
            return candidates
        return [t for t in candidates if policy.is_allowed(t.name, session_label, role)]

    async def prepare_tools(
        self, session_label: str, role: AgentRole, agent_tools: Sequence[str] | None, signal: AbortSignal | None
    ) -> None:
        """Start the MCP servers a run could use (see :mod:`.mcp_tools`); a run's start does it before assembly."""
        if self.mcp is not None:
            from nexus.engine.wiring.mcp_tools import prepare_mcp_tools

            await prepare_mcp_tools(self.mcp, session_label, role, agent_tools, signal)

    async def assemble(
        self,
        message: str | UserMessage,
        *,
        session: str = DEFAULT_SESSION,
        model: str | Model | None = None,
        images: Sequence[ImageContent] = (),
        event: EventContext | None = None,
        depth: int = 0,
        role: AgentRole = "unified",
        signal: AbortSignal | None = None,
        limits: EngineLimits | None = None,
        extra_tools: Sequence[AgentTool] = (),
    ) -> AssembledContext:
        """Context assembly for one message to ``session`` (created if new; aliases resolve).

        The history is the ledger's (compaction summary first); it is repaired in the
        payload before every model call, never rewritten in the ledger.
        """
        chosen = self.model(model)
        workspace = self.config.workspace_path
        scaffold_workspace(workspace)  # the tools need the directory to exist
        window = budget.history_window_chars(chosen)  # the window, not the whole ancestry (docs/ledger.md); patchable
        label, head_id, history = await self._labels.head_history(self.ledger, session, window)
        event = event or EventContext(timezone="UTC")
        profile = prompt_profile(self.config, chosen.provider, chosen.id)  # minimal: no event header either
        header = event if profile == "full" else None
        current = message if isinstance(message, UserMessage) else build_current_message(message, header, images)
        tools = [] if self.chat_only(chosen) else self.tools_for(label, role, depth, extra_tools)
        ctx = assemble_context(
            model=chosen, workspace=workspace, session_label=label, history=history,
            message=current, event=event, tools=tools, limits=limits or self.limits,
            parent_turn_id=head_id, role=role,
            thinking=ThinkingConfig(self.config.thinking) if self.config.thinking != "off" else None,
            abort_signal=signal, prompt=PromptOptions(scaffold=False, profile=profile),  # scaffolded above
            cache=self.sessions.get(label),
        )  # fmt: skip
        ctx.source = event.channel or "user"
        return ctx

    # ------------------------------------------------------------------ runs

    def start(
        self, spec: AgentSpec, session: str, message: str | UserMessage, **options: Unpack[StartOptions]
    ) -> Execution:
        """Start a run of ``spec`` on ``message`` in ``session``; returns its :class:`Execution` at once.

        ``options`` (all optional): ``consumes``, the broker queue items the run's turn consumes (marked
        delivered in the transaction that writes it); ``lease_fence=False`` says they were claimed without
        a session lease (a broker with leases off), so the turn write need not check the claims; ``source``,
        who sent the message (stored with it); ``tools``, offered besides the agent's own (the broker's agent
        tools); ``images``; ``event``; ``signal``; ``callbacks``. A model no call can reach is a
        :class:`~nexus.errors.ConfigError` here, before anything is written; the session is looked up
        (created if new); everything else happens in the execution's task: it waits while another run of
        the session holds its lock (a ``lock_wait`` event), then assembles the context and runs it.

        The session lookup runs on the calling thread: on PostgreSQL it waits for the server there, so
        a coroutine calls :meth:`begin` instead.
        """
        check_start(spec, session, message, options)
        model = self.checked_model(spec)
        return self._launch(spec, model, label_now(self.ledger, session), message, **options)

    async def begin(
        self, spec: AgentSpec, session: str, message: str | UserMessage, **options: Unpack[StartOptions]
    ) -> Execution:
        """:meth:`start` for a coroutine: the session lookup is awaited (off the event loop on PostgreSQL)."""
        check_start(spec, session, message, options)
        model = self.checked_model(spec)
        label = await self._labels.label(self.ledger, session)  # a label seen before is not looked up again
        return self._launch(spec, model, label, message, **options)

    def checked_model(self, spec: AgentSpec) -> Model:
        """The model of ``spec``, checked reachable with its fallbacks (``ConfigError``), before anything is written."""
        model = self.model(spec.model)
        self.preflight(model, spec.fallbacks)
        return model

    def _launch(
        self,
        spec: AgentSpec,
        model: Model,
        label: str,
        message: str | UserMessage,
        *,
        consumes: Sequence[str] = (),
        lease_fence: bool = True,
        source: str | None = None,
        tools: Sequence[AgentTool] = (),
        images: Sequence[ImageContent] = (),
        event: EventContext | None = None,
        signal: AbortSignal | None = None,
        callbacks: EngineCallbacks | None = None,
    ) -> Execution:
        """The execution of a run in the existing session ``label`` (see :meth:`start`)."""
        execution = Execution(new_id(), label, spec.id, signal=signal)
        if callbacks is not None:
            from nexus.engine.execution.callbacks import callbacks_listener

            execution.on_event(callbacks_listener(callbacks))
        request = StartRequest(message, tuple(consumes), source, tuple(tools), tuple(images), event, lease_fence)
        execution._drive(_begin(self, execution, spec, model, request))
        if self.on_start is not None:
            self.on_start(execution)
        if len(self._live) >= self._prune_at:  # not at every start past 64 live runs: 1,000 started at once
            self._live = {run_id: e for run_id, e in self._live.items() if not e.result.done()}  # swept 936 times
            self._prune_at = max(_LIVE_PRUNE, 2 * len(self._live))
        self._live[execution.run_id] = execution
        return execution

    async def context_for(
        self, execution: Execution, spec: AgentSpec, model: Model, request: StartRequest
    ) -> AssembledContext:
        """The assembled context of a run :meth:`start` began (called holding the session's lock)."""
        ctx = await self.assemble(
            request.message, session=execution.session_label, model=model, images=request.images,
            event=request.event, depth=spec.depth, role=spec.role, signal=execution.signal, limits=spec.limits,
            extra_tools=request.tools,
        )  # fmt: skip
        ctx.run_id = execution.run_id
        if spec.tools is not None:
            from nexus.engine.assembly.tool_policy import filter_tools

            ctx.tools = filter_tools(ctx.tools, list(spec.tools)) if spec.tools else []
        if spec.system_prompt:
            ctx.system_prompt = f"{ctx.system_prompt}\n\n## Agent instructions\n\n{spec.system_prompt}"
        if spec.thinking is not None:
            ctx.thinking_config = ThinkingConfig(spec.thinking) if spec.thinking != "off" else None
        if spec.max_tokens is not None:  # e.g. a chat completion's max_tokens
            ctx.max_response_tokens = min(spec.max_tokens, model.max_tokens)
        ctx.queue_item_ids, ctx.lease_fence = request.consumes, request.lease_fence
        if request.source is not None:
            ctx.source = request.source
        return ctx

    def run_of(self, execution: Execution, ctx: AssembledContext, spec: AgentSpec, model: Model) -> None:
        """Attach the run of an assembled ``ctx`` to ``execution``: failover over ``spec``'s fallback chain."""
        fallbacks = self.fallback_models(model, spec.fallbacks)
        limits = spec.limits or self.limits
        run = build_run(
            ctx, execution, ledger=self.ledger, stream_fn=self.stream_fn, model=model, fallbacks=fallbacks,
            auth_profiles=self.auth_profiles([model, *fallbacks]), limits=limits, cooldowns=self.cooldowns,
            options=StreamOptions(timeout=self.config.agent.llm_timeout_s), depth=spec.depth, runtime=self,
            cache=self.sessions.get(ctx.session_label),
        )  # fmt: skip
        execution._attach(run)

    async def run(
        self, spec: AgentSpec, session: str, message: str | UserMessage, **options: Unpack[StartOptions]
    ) -> AgentResult:
        """:meth:`begin` and await the result (the one-call form; ``options`` as for :meth:`start`)."""
        return await (await self.begin(spec, session, message, **options)).result

    def live(self) -> list[Execution]:
        """The executions running now."""
        return [e for e in self._live.values() if not e.result.done()]

    async def compact(
        self,
        session: str,
        *,
        focus: str | None = None,
        model: str | Model | None = None,
        keep_recent_tokens: int | None = None,
        on_event: Callable[[EngineEvent], None] | None = None,
        signal: AbortSignal | None = None,
        on_wait: Callable[[], object] | None = None,
    ) -> SessionCompaction:
        """Summarise the older part of ``session`` now (see :func:`.compact_session.compact_session`: the same
        arguments; this one took neither ``keep_recent_tokens`` nor ``on_wait``, which docs/engine.md gives both)."""
        from nexus.engine.wiring.compact_session import compact_session

        return await compact_session(
            session, runtime=self, focus=focus, model=model, keep_recent_tokens=keep_recent_tokens,
            on_event=on_event, signal=signal, on_wait=on_wait,
        )  # fmt: skip


class _LockHooks:
    """What a run's session lock tells it: a wait, turns it recovered (slotted: no closures and cells per run)."""

    __slots__ = ("execution", "rescued", "runtime", "turns")

    def __init__(self, runtime: Runtime, execution: Execution, rescued: tuple[str, ...]) -> None:
        self.runtime, self.execution, self.rescued, self.turns = runtime, execution, rescued, rescued[:0]

    def waiting(self) -> None:
        from nexus.engine.execution.events import LockWaitEvent

        self.execution._publish(LockWaitEvent())

    def recovered(self, turn_ids: list[str]) -> None:
        from nexus.engine.execution.events import RecoveredEvent

        mine = tuple(turn_id for turn_id in turn_ids if turn_id in self.rescued)
        self.runtime.unsaved[:] = [turn_id for turn_id in self.runtime.unsaved if turn_id not in mine]
        self.turns = tuple(turn_ids)  # the run may find its messages answered by one of them
        self.execution._publish(RecoveredEvent(self.turns, mine))


async def _begin(
    runtime: Runtime, execution: Execution, spec: AgentSpec, model: Model, request: StartRequest
) -> AgentResult:
    """The execution's task: the session's lock, the context, the run (see :meth:`Runtime.start`)."""
    hooks = _LockHooks(runtime, execution, tuple(runtime.unsaved))
    try:
        await admitted()  # a burst of starts goes on a few per round of the loop
        async with run_lock(
            runtime.ledger, execution.session_label, signal=execution.signal,
            on_wait=hooks.waiting, on_recovered=hooks.recovered, orphans=hooks.rescued,
        ) as held:  # fmt: skip
            if not held:
                return aborted_before_start(request.message)
            if hooks.turns and request.consumes and (answered := await answered_before_start(runtime.ledger, request)):
                return answered  # a recovered (rescued) turn consumed the run's queue items: not run again
            await runtime.prepare_tools(execution.session_label, spec.role, spec.tools, execution.signal)
            runtime.run_of(execution, await runtime.context_for(execution, spec, model, request), spec, model)
            run = execution._run
            assert run is not None
            try:
                return await run.main()
            except TurnNotSavedError:  # the next run of the session puts it in the ledger first (from its rescue file)
                if run.turn_id is not None:
                    runtime.unsaved.append(run.turn_id)
                raise
    finally:  # a finished run leaves the live table now: 1,000 ended runs kept their results until the next start
        runtime._live.pop(execution.run_id, None)


def _load_config() -> NexusConfig:
    from nexus.config import load_config

    return load_config()
