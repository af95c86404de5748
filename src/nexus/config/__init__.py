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
    from nexus.config._adapters import AdapterAccount, AdapterBlocks, AdapterConfig, credential_problems
    from nexus.config._broker_schema import (
        QUEUE_MODE_ALIASES,
        AgentConfig,
        BrokerConfig,
        DropPolicy,
        QueueMode,
        check_agent_ids,
    )
    from nexus.config._host_names import ANY_HOST, HostName, parse_host
    from nexus.config._load import dotted, load_config, parse_config, read_config_text
    from nexus.config._mcp_schema import McpConfig, McpServerConfig, McpTransport, check_server_name
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
    from nexus.config._server_schema import ServerConfig
    from nexus.config._telemetry_schema import TelemetryConfig
    from nexus.config._tool_names import (
        BUILTIN_TOOL_NAMES,
        MCP_SEPARATOR,
        TOOL_GROUPS,
        expand_tool_patterns,
        mcp_tool_name,
        rule_allows,
        tool_matches,
        unknown_tool_entries,
    )

_LAZY: dict[str, str] = {
    "credential_problems": "nexus.config._adapters",
    "load_config": "._load",
    "parse_config": "._load",
    "read_config_text": "._load",
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
    "ANY_HOST": "nexus.config._host_names",
    "AgentConfig": "nexus.config._broker_schema",
    "BrokerConfig": "nexus.config._broker_schema",
    "DropPolicy": "nexus.config._broker_schema",
    "HostName": "nexus.config._host_names",
    "MCP_SEPARATOR": "nexus.config._tool_names",
    "McpTransport": "nexus.config._mcp_schema",
    "QueueMode": "nexus.config._broker_schema",
    "QUEUE_MODE_ALIASES": "nexus.config._broker_schema",
    "ServerConfig": "nexus.config._server_schema",
    "check_agent_ids": "nexus.config._broker_schema",
    "check_server_name": "nexus.config._mcp_schema",
    "dotted": "nexus.config._load",
    "expand_tool_patterns": "nexus.config._tool_names",
    "mcp_tool_name": "nexus.config._tool_names",
    "parse_host": "nexus.config._host_names",
    "rule_allows": "nexus.config._tool_names",
    "tool_matches": "nexus.config._tool_names",
    "unknown_tool_entries": "nexus.config._tool_names",
}

__all__ = [
    "ANY_HOST",
    "BUILTIN_TOOL_NAMES",
    "CONFIG_FILE_NAME",
    "DEFAULT_MODELS",
    "LOCAL_INSTALL_HINT",
    "MCP_SEPARATOR",
    "QUEUE_MODE_ALIASES",
    "TOOL_GROUPS",
    "AdapterAccount",
    "AdapterBlocks",
    "AdapterConfig",
    "AgentConfig",
    "AgentLimits",
    "AuthProfile",
    "BrokerConfig",
    "DropPolicy",
    "HostName",
    "LocalModelConfig",
    "LocalModelStatus",
    "McpConfig",
    "McpServerConfig",
    "McpTransport",
    "ModelChoice",
    "ModelOverride",
    "NexusConfig",
    "PromptProfile",
    "ProviderConfig",
    "ProviderSettings",
    "QueueMode",
    "ResolvedProfile",
    "ServerConfig",
    "TelemetryConfig",
    "ToolPolicy",
    "ToolRule",
    "bundled_smollm2_weights",
    "check_agent_ids",
    "check_server_name",
    "config_path",
    "credential_problems",
    "database_dir",
    "dotted",
    "env_references",
    "expand_tool_patterns",
    "key_env_vars",
    "load_config",
    "local_model_status",
    "mcp_tool_name",
    "missing_env",
    "nexus_home",
    "parse_config",
    "parse_host",
    "parse_model_ref",
    "prompt_profile",
    "provider_settings",
    "read_config_text",
    "resolve_default_model",
    "resolve_env",
    "rule_allows",
    "tool_matches",
    "unknown_tool_entries",
]


def __getattr__(name: str) -> Any:
    """Import the pydantic-backed parts on first use (keeps ``import nexus.config`` cheap)."""
    return lazy_attribute(__name__, _LAZY, globals(), name)
