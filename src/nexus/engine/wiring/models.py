"""From a ``provider/model`` ref to a reachable :class:`Model`: resolution, the config's limits, pre-flight checks.

What a run needs to know before anything is written: which model a ref names (the catalog entry
with the config's overrides, or the in-process local model), and whether any call to it can
even be attempted (a provider nothing describes, a key nobody set). The :class:`Runtime` asks
these for every run; ``nexus agents add --model``, ``POST /v1/agents`` and ``[agents.<id>]``
ask :func:`unreachable_model_problem` before an agent is registered with a model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from nexus.engine.types import EngineLimits
from nexus.llm import Model

if TYPE_CHECKING:
    from nexus.config import NexusConfig


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
    from nexus.llm import get_model

    provider, model_id = parse_model_ref(ref)
    if provider == "local":
        from nexus.llm import register_local_model

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
    from nexus.llm import DEFAULT_MODEL_ID

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
    from nexus.llm import base_url_env_var, base_url_missing, known_providers

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
    from nexus.llm import get_model

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
    from nexus.llm import effective_base_url, key_required

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
            raise ConfigError(_named_where(config, model.ref) + unknown)
    problems = []
    for model in (primary, *fallbacks):
        problem = model_problem(config, model)
        if problem is None:
            return
        problems.append(problem)
    raise ConfigError("no usable model for this run:\n  " + "\n  ".join(problems))


def _named_where(config: NexusConfig, ref: str) -> str:
    """``file:line: key: `` of the config key that names model ``ref`` (``default_model``, ``fallbacks[i]``), so the
    refusal points at the line to fix like every other config error; empty when no file names it (``-m``, an
    agent's own model, the environment)."""
    if config.source is None:
        return ""
    if config.default_model == ref and not os.environ.get("NEXUS_MODEL"):
        return f"{config.where('default_model')}: default_model: "
    if ref in config.fallbacks:
        index = config.fallbacks.index(ref)
        return f"{config.where('fallbacks', index)}: fallbacks[{index}]: "
    return ""
