"""Configuration: ``$NEXUS_HOME/nexus.toml`` validated strictly, merged with the environment.

Layer 0: imports nothing from nexus but ``nexus.errors``. The path helpers are cheap;
the config model (pydantic) is imported on first use of anything else, so ``nexus
--help`` and ``import nexus.config`` stay fast.

Typical use::

    from nexus.config import load_config, resolve_default_model
    config = load_config()                      # defaults + environment if no file
    choice = resolve_default_model(config)      # ModelChoice(provider, model_id, reason)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.config._env import env_references, missing_env, resolve_env
from nexus.config._paths import CONFIG_FILE_NAME, config_path, database_dir, nexus_home

if TYPE_CHECKING:
    from nexus.config._adapters import AdapterAccount, AdapterBlocks, AdapterConfig
    from nexus.config._load import load_config, parse_config
    from nexus.config._mcp_schema import McpConfig, McpServerConfig
    from nexus.config._profile import ResolvedProfile
    from nexus.config._resolve import (
        DEFAULT_MODELS,
        LOCAL_INSTALL_HINT,
        LocalModelStatus,
        ModelChoice,
        ProviderSettings,
        bundled_smollm2_weights,
        key_env_vars,
        local_model_status,
        parse_model_ref,
        prompt_profile,
        provider_settings,
        resolve_default_model,
    )
    from nexus.config._schema import (
        AgentLimits,
        AuthProfile,
        LocalModelConfig,
        ModelOverride,
        NexusConfig,
        PromptProfile,
        ProviderConfig,
        ToolPolicy,
        ToolRule,
    )
    from nexus.config._telemetry_schema import TelemetryConfig
    from nexus.config._tool_names import BUILTIN_TOOL_NAMES, TOOL_GROUPS

_LAZY: dict[str, str] = {
    "load_config": "._load",
    "parse_config": "._load",
    "DEFAULT_MODELS": "._resolve",
    "LOCAL_INSTALL_HINT": "._resolve",
    "LocalModelStatus": "._resolve",
    "ModelChoice": "._resolve",
    "ProviderSettings": "._resolve",
    "ResolvedProfile": "._profile",
    "bundled_smollm2_weights": "._resolve",
    "key_env_vars": "._resolve",
    "local_model_status": "._resolve",
    "parse_model_ref": "._resolve",
    "prompt_profile": "._resolve",
    "provider_settings": "._resolve",
    "resolve_default_model": "._resolve",
    "TOOL_GROUPS": "._tool_names",
    "BUILTIN_TOOL_NAMES": "._tool_names",
    "AdapterAccount": "._adapters",
    "AdapterBlocks": "._adapters",
    "AdapterConfig": "._adapters",
    "McpConfig": "._mcp_schema",
    "TelemetryConfig": "._telemetry_schema",
    "McpServerConfig": "._mcp_schema",
    "AgentLimits": "._schema",
    "AuthProfile": "._schema",
    "LocalModelConfig": "._schema",
    "ModelOverride": "._schema",
    "NexusConfig": "._schema",
    "PromptProfile": "._schema",
    "ProviderConfig": "._schema",
    "ToolPolicy": "._schema",
    "ToolRule": "._schema",
}

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "CONFIG_FILE_NAME",
    "DEFAULT_MODELS",
    "LOCAL_INSTALL_HINT",
    "TOOL_GROUPS",
    "AdapterAccount",
    "AdapterBlocks",
    "AdapterConfig",
    "AgentLimits",
    "AuthProfile",
    "LocalModelConfig",
    "LocalModelStatus",
    "McpConfig",
    "McpServerConfig",
    "ModelChoice",
    "ModelOverride",
    "NexusConfig",
    "PromptProfile",
    "ProviderConfig",
    "ProviderSettings",
    "ResolvedProfile",
    "TelemetryConfig",
    "ToolPolicy",
    "ToolRule",
    "bundled_smollm2_weights",
    "config_path",
    "database_dir",
    "env_references",
    "key_env_vars",
    "load_config",
    "local_model_status",
    "missing_env",
    "nexus_home",
    "parse_config",
    "parse_model_ref",
    "prompt_profile",
    "provider_settings",
    "resolve_default_model",
    "resolve_env",
]


def __getattr__(name: str) -> Any:
    """Import the pydantic-backed parts on first use (keeps ``import nexus.config`` cheap)."""
    return lazy_attribute(__name__, _LAZY, globals(), name)
