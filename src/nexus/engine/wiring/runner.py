"""From config + ledger to a running agent: ``EngineEnv``, ``assemble``, ``run_agent`` (seed 001).

:class:`EngineEnv` holds what every run of a process shares (config, ledger, the provider
stream function, auth-profile cooldowns, limits). ``env.assemble(...)`` builds an
:class:`AssembledContext` for a session (system prompt with the workspace's bootstrap
files, history from the ledger, the current message with its event context, the tools the
policy allows plus ``spawn_agent`` while the depth allows, model, budget); ``env.start(ctx)``
runs it through :func:`~nexus.engine.execution.execute.execute` with the configured fallbacks and
profiles. :func:`run_agent` does all of that in one call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nexus.config._profile import ResolvedProfile
from nexus.engine.assembly._sessions import SessionStates
from nexus.engine.assembly.bootstrap import scaffold_workspace
from nexus.engine.assembly.context import EventContext, PromptOptions, assemble_context, build_current_message
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.failover import ProfileCooldowns
from nexus.engine.execution.session_lock import run_lock
from nexus.engine.types import AgentResult, AgentRole, AssembledContext, EngineLimits, ThinkingConfig
from nexus.engine.wiring.spawn import SPAWN_TOOL_NAME, Spawner, spawn_agent_tool
from nexus.ledger.records import DEFAULT_SESSION
from nexus.llm.abort import AbortSignal
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.types import ImageContent, Model, UserMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from nexus.agent.tool_types import AgentTool
    from nexus.config import NexusConfig
    from nexus.engine.execution.execute import Execution
    from nexus.engine.types import EngineEvent
    from nexus.engine.wiring.compact_session import SessionCompaction
    from nexus.ledger import Ledger
    from nexus.mcp import McpServers

log = logging.getLogger("nexus.engine")


def limits_from_config(config: NexusConfig) -> EngineLimits:
    """The ``[agent]`` table of ``nexus.toml`` as :class:`EngineLimits`."""
    agent = config.agent
    return EngineLimits(
        max_iterations=agent.max_iterations,
        max_retries=agent.max_retries,
        max_tool_result_chars=agent.max_tool_result_chars,
        timeout_ms=agent.timeout_ms,
        subagent_max_depth=agent.subagent_max_depth,
        reserve_tokens=agent.compaction_reserve_tokens,
        keep_recent_tokens=max(1, agent.compaction_keep_recent_tokens),
    )


def resolve_model(config: NexusConfig, ref: str) -> Model:
    """``provider/model`` → :class:`Model`: the catalog entry (or defaults) with the config's overrides.

    ``[providers.<name>]`` may set the wire ``api``, ``base_url`` (also ``<PROVIDER>_BASE_URL``),
    ``headers`` and per-model facts (context window, prices…). ``local/<id>`` registers the
    in-process llama.cpp model from the ``[local]`` table; a local model id that is not
    configured is a :class:`~nexus.errors.ConfigError` saying how to configure one. (An
    unknown provider is reported by :func:`preflight`: with a custom ``stream_fn`` any
    provider name is fine.)
    """
    from nexus.config import parse_model_ref, provider_settings
    from nexus.llm.catalog import get_model

    provider, model_id = parse_model_ref(ref)
    if provider == "local":
        from nexus.llm.providers.llama_cpp import register_local_model

        local = config.local
        _check_local_id(config, model_id)
        declared = config.providers.get("local")
        override = declared.models.get(model_id) if declared is not None else None
        max_tokens = override.max_tokens if override is not None else None
        path = config.local_model_path
        return register_local_model(model_id, path, local.n_ctx, local.n_threads, local.chat_format, max_tokens)
    settings = provider_settings(config, provider)
    declared = config.providers.get(provider)
    model = get_model(provider, model_id)
    changes: dict[str, object] = {}
    if declared is not None and declared.api:
        changes["api"] = declared.api
    if settings.base_url:
        changes["base_url"] = settings.base_url
    if settings.headers:
        changes["headers"] = settings.headers
    override = settings.models.get(model_id)
    if override is not None:  # (prompt_profile is not a Model fact: assemble() reads it from the config)
        changes.update({k: v for k, v in override.model_dump(exclude={"prompt_profile"}).items() if v is not None})
    return replace(model, **changes) if changes else model  # type: ignore[arg-type]


def local_model_ids(config: NexusConfig) -> list[str]:
    """The ids ``local/<id>`` may name: ``local.model_id`` (and SmolLM2's id while no model_path is set)."""
    from nexus.llm.providers.llama_cpp import DEFAULT_MODEL_ID

    ids = [config.local.model_id]
    if config.local.model_path is None and DEFAULT_MODEL_ID not in ids:
        ids.append(DEFAULT_MODEL_ID)
    return ids


def _check_local_id(config: NexusConfig, model_id: str) -> None:
    known = local_model_ids(config)
    if model_id in known:
        return
    from nexus.errors import ConfigError

    raise ConfigError(
        f"unknown local model {model_id!r}: the local provider runs the model of the [local] table "
        f"(known: {', '.join('local/' + k for k in known)}). To run another GGUF file, set in nexus.toml:\n"
        f'  [local]\n  model_id = "{model_id}"\n  model_path = "/path/to/model.gguf"'
    )


def unknown_provider_problem(model: Model) -> str | None:
    """Why nothing says where ``model``'s provider lives (not built in, no base_url anywhere), or None."""
    from nexus.llm.keys import base_url_env_var, base_url_missing, known_providers

    if not base_url_missing(model):
        return None
    provider = model.provider
    return (
        f"unknown provider {provider!r} in model {model.ref!r}. Known providers: "
        f"{', '.join([*known_providers(), 'local'])}. To use another server, add it to nexus.toml:\n"
        f'  [providers.{provider}]\n  base_url = "https://…/v1"\n'
        f'  api = "openai-completions"   # or "openai-responses", "anthropic-messages"\n'
        f'  api_key = "…"   # leave out for a local server\n'
        f"(or export {base_url_env_var(provider)})"
    )


def unreachable_model_problem(config: NexusConfig, ref: str) -> str | None:
    """Why no run could ever reach model ``ref`` (an unknown provider, an unconfigured local id), or None.

    Asked where a model is registered for later — ``nexus agents add --model``, ``POST /v1/agents``,
    ``[agents.<id>] model`` — since an agent registered with it would accept every message and
    fail each run. Keys are not looked at (nor ``${VAR}``s resolved): a missing key can still
    be exported before the agent runs.
    """
    from nexus.config import parse_model_ref
    from nexus.errors import ConfigError
    from nexus.llm.catalog import get_model

    try:
        provider, model_id = parse_model_ref(ref)
        if provider == "local":
            _check_local_id(config, model_id)
            return None
    except ConfigError as exc:
        return str(exc)
    declared = config.providers.get(provider)
    if declared is not None and declared.base_url:
        return None
    model = get_model(provider, model_id)
    if declared is not None and declared.api:
        model = replace(model, api=declared.api)
    return unknown_provider_problem(model)


def model_problem(config: NexusConfig, model: Model) -> str | None:
    """Why a call to ``model`` cannot even be attempted (no key for a provider that needs one), or None.

    Keys come from ``[providers.<name>]`` (``api_key`` / ``auth_profiles``) or the environment;
    local models and servers on localhost need none.
    """
    from nexus.config import key_env_vars, provider_settings
    from nexus.llm.keys import effective_base_url, key_required

    settings = provider_settings(config, model.provider)
    if settings.keyless or any(p.api_key is not None for p in settings.profiles):
        return None
    base_url = effective_base_url(model) or ""
    if not key_required(model.provider, base_url):
        return None
    unset = sorted({name for p in settings.profiles for name in p.missing})
    if unset:
        return f"{model.ref}: the key of [providers.{model.provider}] uses {', '.join(unset)}, which is not set"
    names = " or ".join(key_env_vars(model.provider))
    return (
        f"{model.ref}: no API key for provider {model.provider!r}: export {names}=…, "
        f'or put the key in nexus.toml: [providers.{model.provider}] api_key = "…"'
    )


def preflight(config: NexusConfig, primary: Model, fallbacks: Sequence[Model] = ()) -> None:
    """Refuse a run that cannot reach any model, before anything is written (ConfigError).

    The run may start when the primary model or one of the fallbacks has a usable key (or
    needs none); otherwise every problem is listed.
    """
    from nexus.errors import ConfigError

    for model in (primary, *fallbacks):  # a provider nothing describes is a mistake wherever it is named
        unknown = unknown_provider_problem(model)
        if unknown is not None:
            raise ConfigError(unknown)
    problems = []
    for model in (primary, *fallbacks):
        problem = model_problem(config, model)
        if problem is None:
            return
        problems.append(problem)
    raise ConfigError("no usable model for this run:\n  " + "\n  ".join(problems))


@dataclass(slots=True)
class EngineEnv:
    """What the runs of one process share; build it with :meth:`from_config`.

    ``stream_fn`` is the provider call (``None`` = ``nexus.llm.stream``); ``tools`` replaces
    the coding tools (the policy still applies). ``cooldowns`` is the auth-profile cooldown
    table (``None`` = the process-wide one).
    """

    config: NexusConfig
    ledger: Ledger
    stream_fn: StreamFn | None = None
    limits: EngineLimits = field(default_factory=EngineLimits)
    cooldowns: ProfileCooldowns | None = None
    tools: Sequence[AgentTool] | None = None
    _models: dict[str, Model] = field(default_factory=dict)
    sessions: SessionStates = field(default_factory=SessionStates)
    spawner: Spawner | None = None
    """Who runs ``spawn_agent`` workers (None = the engine's own; the broker installs its own)."""
    fallback_refs: Sequence[str] | None = None
    """The fallback chain (``provider/model`` refs); None = the config's ``fallbacks``."""
    _coding_tools: list[AgentTool] | None = None
    """The coding tools of this env's workspace, built once (they hold no per-run state)."""
    mcp: McpServers | None = None
    """The process's MCP servers (``[mcp.servers]``), whose tools runs get by policy; None = none enabled."""

    @classmethod
    def from_config(
        cls,
        config: NexusConfig,
        ledger: Ledger,
        *,
        stream_fn: StreamFn | None = None,
        limits: EngineLimits | None = None,
        cooldowns: ProfileCooldowns | None = None,
        tools: Sequence[AgentTool] | None = None,
    ) -> EngineEnv:
        """An environment whose limits come from ``config`` unless ``limits`` is given."""
        from nexus.engine.wiring.mcp_tools import mcp_servers_for

        env = cls(config, ledger, stream_fn, limits or limits_from_config(config), cooldowns, tools)
        env.mcp = mcp_servers_for(config)
        return env

    def model(self, ref: str | Model | None = None) -> Model:
        """The model for ``ref`` (a ``Model`` is used as is; ``None`` = the configured default).

        Resolved models are kept for the life of this env (a runtime's catalog): the default is
        decided once (it looks at keys and the local model's files), not on every run.
        """
        if isinstance(ref, Model):
            return ref
        if ref is None:
            default = self._models.get("")
            if default is not None:
                return default
            from nexus.config import resolve_default_model

            ref = resolve_default_model(self.config).ref
            self._models[""] = found_default = self.model(ref)
            return found_default
        found = self._models.get(ref)
        if found is None:
            found = self._models[ref] = resolve_model(self.config, ref)
        return found

    def fallback_models(self, primary: Model) -> list[Model]:
        """The configured ``fallbacks`` as models, without ``primary``."""
        refs = self.config.fallbacks if self.fallback_refs is None else self.fallback_refs
        return [self.model(ref) for ref in refs if ref != primary.ref]

    def preflight(self, primary: Model) -> None:
        """:func:`preflight` for ``primary`` and the configured fallbacks (skipped with a custom ``stream_fn``)."""
        if self.stream_fn is None:
            preflight(self.config, primary, self.fallback_models(primary))

    def auth_profiles(self, models: Sequence[Model]) -> dict[str, list[ResolvedProfile]]:
        """Each provider's usable keys from config/environment, in rotation order.

        The keys are registered with :func:`nexus.llm.redact.add_secrets`: no error text repeats one.
        """
        from nexus.config import provider_settings
        from nexus.llm.redact import add_secrets

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

    def tools_for(self, session_label: str, role: AgentRole, depth: int) -> list[AgentTool]:
        """The tools this session/role may use: coding tools (or ``tools``) by policy, plus ``spawn_agent``."""
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
            candidates += self.mcp.tools()  # the listed servers' tools (prepare_tools started them)
        policy = self.config.tools
        return [t for t in candidates if policy.is_allowed(t.name, session_label, role)]

    async def prepare_tools(
        self, session_label: str, role: AgentRole, agent_tools: Sequence[str] | None, signal: AbortSignal | None
    ) -> None:
        """Start the MCP servers a run could use (see :mod:`.mcp_tools`); call it before :meth:`assemble`."""
        from nexus.engine.wiring.mcp_tools import prepare_mcp_tools

        await prepare_mcp_tools(self.mcp, session_label, role, agent_tools, signal)

    def chat_only(self, model: Model) -> bool:
        """True for the bundled SmolLM2-135M: it cannot use tools (it picks wrong ones and loops).

        Offering them would also cost ~1.4k of its 4k context and force non-streamed generation,
        so it runs as a plain chat model. A GGUF configured with ``local.model_path`` gets tools.
        """
        return model.api == "llama-cpp" and self.config.local.model_path is None

    def assemble(
        self,
        message: str | UserMessage,
        *,
        session: str = DEFAULT_SESSION,
        model: str | Model | None = None,
        images: Sequence[ImageContent] = (),
        event: EventContext | None = None,
        channel: str | None = None,
        timezone: str | None = None,
        depth: int = 0,
        role: AgentRole = "unified",
        signal: AbortSignal | None = None,
        source_event_id: str | None = None,
    ) -> AssembledContext:
        """Context assembly for one message to ``session`` (created if new; aliases resolve).

        The history is the ledger's (compaction summary first); it is repaired in the
        payload before every model call, never rewritten in the ledger.
        """
        chosen = self.model(model)
        scaffold_workspace(self.config.workspace_path)  # the tools need the directory to exist
        label = self.ledger.ensure_session(session).label
        head = self.ledger.head(label)
        from nexus.engine.assembly.budget import history_window_chars

        window = history_window_chars(chosen)  # the window, not the whole ancestry (docs/ledger.md)
        history = self.ledger.history_at(head.id, max_chars=window) if head is not None else []
        if event is None:
            event = EventContext(timezone=timezone or "UTC", channel=channel)
        from nexus.config import prompt_profile

        profile = prompt_profile(self.config, chosen.provider, chosen.id)  # minimal: no event header either
        header = event if profile == "full" else None
        current = message if isinstance(message, UserMessage) else build_current_message(message, header, images)
        ctx = assemble_context(
            model=chosen,
            workspace=self.config.workspace_path,
            session_label=label,
            history=history,
            message=current,
            event=event,
            tools=[] if self.chat_only(chosen) else self.tools_for(label, role, depth),
            limits=self.limits,
            parent_turn_id=head.id if head is not None else None,
            role=role,
            source_event_id=source_event_id,
            thinking=ThinkingConfig(self.config.thinking) if self.config.thinking != "off" else None,
            abort_signal=signal,
            prompt=PromptOptions(scaffold=False, profile=profile),  # scaffolded above
            cache=self.sessions.get(label),
        )
        ctx.source = event.channel or "user"
        return ctx

    def start(
        self,
        ctx: AssembledContext,
        callbacks: EngineCallbacks | None = None,
        *,
        model: Model | None = None,
        depth: int = 0,
        agent_id: str = "",
    ) -> Execution:
        """Run ``ctx`` with the configured fallback chain, auth profiles, cooldowns and limits."""
        from nexus.engine.execution.execute import execute

        primary = model or self.model(f"{ctx.provider}/{ctx.model}")
        fallbacks = self.fallback_models(primary)
        return execute(
            ctx,
            callbacks,
            ledger=self.ledger,
            stream_fn=self.stream_fn,
            model=primary,
            fallbacks=fallbacks,
            auth_profiles=self.auth_profiles([primary, *fallbacks]),
            limits=self.limits,
            cooldowns=self.cooldowns,
            options=StreamOptions(timeout=self.config.agent.llm_timeout_s),
            depth=depth,
            env=self,
            cache=self.sessions.get(ctx.session_label),
            agent_id=agent_id,
        )

    async def compact(
        self,
        session: str,
        *,
        focus: str | None = None,
        model: str | Model | None = None,
        on_event: Callable[[EngineEvent], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> SessionCompaction:
        """Summarise the older part of ``session`` now (see :func:`.compact_session.compact_session`)."""
        from nexus.engine.wiring.compact_session import compact_session

        return await compact_session(session, env=self, focus=focus, model=model, on_event=on_event, signal=signal)


async def run_agent(
    message: str | UserMessage,
    *,
    session: str | None = None,
    model: str | Model | None = None,
    config: NexusConfig | None = None,
    ledger: Ledger | None = None,
    callbacks: EngineCallbacks | None = None,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    images: Sequence[ImageContent] = (),
    event: EventContext | None = None,
) -> AgentResult:
    """Send ``message`` to ``session`` (default ``main``) and return the run's :class:`AgentResult`.

    Opens ``$NEXUS_HOME/nexus.toml`` and the ledger when not given (closing the ledger it
    opened), closes turns a crashed process left open (``ledger.recover()``), assembles the
    context, runs it and writes the turn. ``signal`` aborts the run (its partial output is kept).
    """
    if config is None:
        from nexus.config import load_config

        config = load_config()
    own = ledger is None
    if ledger is None:
        from nexus.ledger import Ledger

        ledger = Ledger.open(config.database_path)
    try:
        ledger.recover()
        env = EngineEnv.from_config(config, ledger, stream_fn=stream_fn)
        chosen = env.model(model)
        env.preflight(chosen)
        label = ledger.ensure_session(session or DEFAULT_SESSION).label
        # one run per session at a time, also across processes (DESIGN §4.3's serial invariant)
        # (orphaned turns of the session are recovered under the lock, before the head is read)
        async with run_lock(ledger, label, signal=signal) as held:
            if not held:
                return aborted_before_start(message)
            await env.prepare_tools(label, "unified", None, signal)
            ctx = env.assemble(message, session=label, model=chosen, images=images, event=event, signal=signal)
            return await env.start(ctx, callbacks, model=chosen).result
    finally:
        if own:
            ledger.close()


def aborted_before_start(message: str | UserMessage) -> AgentResult:
    """The result of a run aborted while it waited for another run of its session: nothing ran or was stored."""
    from nexus.engine.types import AgentError
    from nexus.ledger.records import StoredMessage

    query = message if isinstance(message, UserMessage) else UserMessage(message)
    text = "aborted while waiting for another run of the session to finish; nothing was sent or stored"
    return AgentResult(
        messages=[StoredMessage(0, "", 0, query.role, query)],
        stop_reason="aborted",
        error=AgentError("unknown", text, retryable=True),
    )
