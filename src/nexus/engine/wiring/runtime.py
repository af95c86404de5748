"""``Runtime`` (process services) + ``AgentSpec`` (one agent) → ``runtime.start(...)`` → ``Execution``.

What a process has once — the config, the ledger, auth-profile cooldowns, the resolved model
catalog, the per-session state (bounded by bytes) and the :class:`Spawner` — lives on one
:class:`Runtime`. What an agent *is* — id, role, model and fallbacks, tool allow list, extra
system-prompt text, limits — is an :class:`AgentSpec`. ``runtime.start(spec, session, message)``
assembles the context from the ledger and returns the running :class:`Execution` at once;
``await runtime.run(...)`` is the same plus the cross-process session lock and the result.
See docs/engine.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass
from nexus.engine.assembly._sessions import DEFAULT_MAX_BYTES, SessionStates
from nexus.engine.execution.failover import ProfileCooldowns
from nexus.engine.types import AgentResult, AgentRole, EngineLimits
from nexus.engine.wiring.spawn import EngineSpawner, Spawner
from nexus.errors import NexusError
from nexus.llm.types import ImageContent, Model, UserMessage

if TYPE_CHECKING:
    from nexus.agent.tool_types import AgentTool
    from nexus.config import NexusConfig
    from nexus.engine.assembly.context import EventContext
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.engine.execution.execute import Execution
    from nexus.engine.wiring.runner import EngineEnv
    from nexus.ledger import Ledger
    from nexus.llm.abort import AbortSignal
    from nexus.llm.options import StreamFn
    from nexus.mcp import McpServers


class SessionBusyError(NexusError):
    """A run of this session is already executing in this runtime: steer it, or wait for its result."""


@dataclass(slots=True, frozen=True)
class AgentSpec:
    """One agent: who it is and how it runs (the process services are the :class:`Runtime`'s).

    ``model`` is ``provider/model`` (None = the config's default); ``fallbacks`` replaces the
    config's chain when given; ``tools`` narrows the tools the policy allows to these names,
    globs or groups (None = all the policy allows); ``system_prompt`` is appended to the
    assembled prompt as the agent's instructions; ``limits`` replaces the config's.
    """

    id: str = "main"
    role: AgentRole = "unified"
    model: str | None = None
    fallbacks: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    system_prompt: str = ""
    limits: EngineLimits | None = None


@dataclass(slots=True, eq=False)
class Runtime:
    """The process-wide services every execution shares (one per process); see the module docstring.

    ``stream_fn`` replaces the provider call (tests: a ``ScriptedModel``'s); ``tools`` replaces
    the coding tools (the policy still applies); ``session_bytes`` bounds the per-session state.
    """

    config: NexusConfig
    ledger: Ledger
    stream_fn: StreamFn | None = None
    cooldowns: ProfileCooldowns = field(default_factory=ProfileCooldowns)
    tools: Sequence[AgentTool] | None = None
    spawner: Spawner = field(default_factory=EngineSpawner)
    sessions: SessionStates = field(default_factory=lambda: SessionStates(DEFAULT_MAX_BYTES))
    mcp: McpServers | None = None
    """The MCP servers of ``[mcp.servers]`` (one connection each, shared by every run); made from the config."""
    _models: dict[str, Model] = field(default_factory=dict, repr=False)
    _live: dict[str, Execution] = field(default_factory=dict, repr=False)
    _owns_ledger: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.mcp is None:
            from nexus.engine.wiring.mcp_tools import mcp_servers_for

            self.mcp = mcp_servers_for(self.config)

    @classmethod
    def open(cls, config: NexusConfig | None = None, **kwargs: object) -> Runtime:
        """A runtime on ``$NEXUS_HOME`` (nexus.toml, agents.db); closes turns a crashed process left open."""
        from nexus.ledger import Ledger

        if config is None:
            from nexus.config import load_config

            config = load_config()
        ledger = Ledger.open(config.database_path)
        ledger.recover()
        runtime = cls(config, ledger, **kwargs)  # type: ignore[arg-type]
        runtime._owns_ledger = True
        return runtime

    def close(self) -> None:
        """Close the ledger if :meth:`open` opened it."""
        if self._owns_ledger:
            self.ledger.close()

    async def aclose(self) -> None:
        """Stop the MCP servers this runtime started, then :meth:`close`."""
        if self.mcp is not None:
            await self.mcp.close()
        self.close()

    def env(self, spec: AgentSpec | None = None) -> EngineEnv:
        """The engine wiring for one agent: these services plus ``spec``'s limits."""
        from nexus.engine.wiring.runner import EngineEnv, limits_from_config

        spec = spec or AgentSpec()
        env = EngineEnv(
            self.config,
            self.ledger,
            self.stream_fn,
            spec.limits or limits_from_config(self.config),
            self.cooldowns,
            self.tools,
            self._models,
            self.sessions,
        )
        env.spawner = self.spawner
        env.mcp = self.mcp
        if spec.fallbacks is not None:
            env.fallback_refs = spec.fallbacks
        return env

    def start(
        self,
        spec: AgentSpec,
        session: str,
        message: str | UserMessage,
        *,
        images: Sequence[ImageContent] = (),
        event: EventContext | None = None,
        signal: AbortSignal | None = None,
        callbacks: EngineCallbacks | None = None,
    ) -> Execution:
        """Assemble ``message`` for ``session`` and start running it; returns the :class:`Execution` at once.

        One run per session: a second start while one executes raises :class:`SessionBusyError`
        (steer the running one). Across processes, :meth:`run` also takes the session lock.
        """
        env = self.env(spec)
        label = self.ledger.ensure_session(session).label
        live = self._live.get(label)
        if live is not None and not live.result.done():
            raise SessionBusyError(f"session {label!r} is running ({live.run_id}); steer it or await its result")
        model = env.model(spec.model)
        env.preflight(model)
        ctx = env.assemble(message, session=label, model=model, images=images, event=event, signal=signal,
                           role=spec.role)  # fmt: skip
        if spec.tools is not None:
            from nexus.engine.assembly.tool_policy import filter_tools

            ctx.tools = filter_tools(ctx.tools, list(spec.tools)) if spec.tools else []
        if spec.system_prompt:
            ctx.system_prompt = f"{ctx.system_prompt}\n\n## Agent instructions\n\n{spec.system_prompt}"
        execution = env.start(ctx, callbacks, model=model, agent_id=spec.id)
        self._live[label] = execution
        execution.result.add_done_callback(lambda _: self._forget(label, execution))
        return execution

    def _forget(self, label: str, execution: Execution) -> None:
        if self._live.get(label) is execution:
            del self._live[label]

    async def run(
        self,
        spec: AgentSpec,
        session: str,
        message: str | UserMessage,
        *,
        signal: AbortSignal | None = None,
        callbacks: EngineCallbacks | None = None,
        **kwargs: object,
    ) -> AgentResult:
        """:meth:`start` under the cross-process session lock, and the result (the one-call form)."""
        from nexus.engine.execution.session_lock import run_lock
        from nexus.engine.wiring.runner import aborted_before_start

        label = self.ledger.ensure_session(session).label
        async with run_lock(self.ledger, label, signal=signal) as held:
            if not held:
                return aborted_before_start(message)
            await self.env(spec).prepare_tools(label, spec.role, spec.tools, signal)  # MCP servers it may use
            execution = self.start(spec, label, message, signal=signal, callbacks=callbacks, **kwargs)  # type: ignore[arg-type]
            return await execution.result

    def live(self) -> list[Execution]:
        """The executions running now."""
        return [e for e in self._live.values() if not e.result.done()]
