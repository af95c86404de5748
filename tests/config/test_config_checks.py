"""Config values that used to be accepted and fail later (issue 8, items 9, 12, 13, 18, 21): refused at load or use.

Every error names ``file:line`` and the key, and says what to write instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.config import (
    env_references,
    load_config,
    missing_env,
    parse_config,
    prompt_profile,
    provider_settings,
    resolve_env,
)
from nexus.config._load import MAX_NESTING
from nexus.config._toml_lines import nesting_overflow_line
from nexus.errors import ConfigError

# --------------------------------------------------------------------------- nesting (item 9)


def test_absurd_nesting_is_refused_with_its_line_not_a_recursion_error() -> None:
    text = 'default_model = "openai/gpt-4o-mini"\n\na = ' + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, "my.toml")
    assert str(info.value).startswith(f"my.toml:3: a value nests arrays or tables more than {MAX_NESTING} levels")


def test_inline_tables_count_and_strings_and_comments_do_not() -> None:
    deep_tables = "x = " + "{a = " * 40 + "1" + "}" * 40
    assert nesting_overflow_line(deep_tables, MAX_NESTING) == 1
    harmless = 's = "' + "[" * 100 + '"\n' + "# " + "{" * 100 + "\n" + "m = '''\n" + "[" * 100 + "\n'''\n"
    assert nesting_overflow_line(harmless, MAX_NESTING) is None
    brackets = "[" * 100
    config = parse_config(f'# {brackets}\ndefault_model = "a/{brackets}"\n')
    assert config.default_model == f"a/{brackets}"


def test_ordinary_nesting_still_loads() -> None:
    config = parse_config('[tools]\nallow = ["read", "ls"]\n[providers.x]\nheaders = { "A" = "b" }\n')
    assert config.tools.allow == ["read", "ls"]


# --------------------------------------------------------------------------- ${VAR} and ${VAR:-default} (item 12)


def test_default_is_used_when_the_variable_is_unset_or_empty() -> None:
    assert resolve_env("${A:-x}/${B:-}/${C}", {"C": "c"}) == "x//c"
    assert resolve_env("${A:-x}", {"A": ""}) == "x"
    assert resolve_env("${A:-x}", {"A": "set"}) == "set"
    assert env_references("${A:-x} ${B}") == ["A", "B"]
    assert missing_env("${A:-x} ${B}", {}) == ["B"]


def test_a_value_without_references_is_kept_without_compiling_the_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    from nexus._lazy import LazyPattern
    from nexus.config import _env

    fresh = LazyPattern(_env._REFERENCE._pattern)
    monkeypatch.setattr(_env, "_REFERENCE", fresh)
    assert resolve_env("https://api.example.com/$x{y}", {}) == "https://api.example.com/$x{y}"
    assert fresh._compiled is None  # most values of a config: the pattern's compile was a part of every run
    assert resolve_env("${A}", {"A": "a"}) == "a" and fresh._compiled is not None


def test_unset_variable_names_file_line_and_variable(tmp_path: Path) -> None:
    file = tmp_path / "nexus.toml"
    file.write_text('[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\n\napi_key = "${NX_UNSET}"\n')
    config = load_config(file, {})
    with pytest.raises(ConfigError) as info:
        provider_settings(config, "openai", {"OPENAI_API_KEY": "sk-env"})
    message = str(info.value)
    assert message.startswith(f"{file}:4: providers.openai.api_key uses ${{NX_UNSET}} but NX_UNSET is not set")
    assert "${NX_UNSET:-default}" in message


def test_unset_variable_in_one_profile_fails_the_provider_instead_of_skipping_it() -> None:
    text = (
        '[[providers.openai.auth_profiles]]\nname = "a"\napi_key = "${K1}"\n'
        '[[providers.openai.auth_profiles]]\nname = "b"\napi_key = "${K2}"\n'
    )
    with pytest.raises(ConfigError, match=r"nexus.toml:6: providers\.openai\.auth_profiles\[1\] uses \$\{K2\}"):
        provider_settings(parse_config(text), "openai", {"K1": "one"})


def test_empty_default_makes_a_profile_optional() -> None:
    text = (
        '[[providers.openai.auth_profiles]]\nname = "a"\napi_key = "${K1}"\n'
        '[[providers.openai.auth_profiles]]\nname = "b"\napi_key = "${K2:-}"\n'
    )
    settings = provider_settings(parse_config(text), "openai", {"K1": "one", "OPENAI_API_KEY": "env"})
    assert [(p.name, p.api_key) for p in settings.profiles] == [("a", "one")]
    optional_only = parse_config('[providers.openai]\napi_key = "${K2:-}"\n')
    settings = provider_settings(optional_only, "openai", {"OPENAI_API_KEY": "env"})
    assert [(p.name, p.api_key) for p in settings.profiles] == [("env", "env")]


def test_a_provider_nobody_uses_does_not_need_its_variables() -> None:
    config = parse_config('[providers.openai]\napi_key = "${NX_UNSET}"\n')
    assert provider_settings(config, "anthropic", {"ANTHROPIC_API_KEY": "k"}).has_key


# --------------------------------------------------------------------------- base_url (item 13)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.com/v1", "is not an http:// or https:// URL"),
        ("not a url", "is not an http:// or https:// URL"),
        ("http://", "needs a host name"),
        ("http://host:port/v1", "is not a valid URL"),
        ("https://ex ample.com", "needs a host name"),
    ],
)
def test_bad_base_url_is_refused_at_load_with_its_line(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f'\n[providers.x]\nbase_url = "{url}"\n')
    assert "nexus.toml:3: providers.x.base_url" in str(info.value) and problem in str(info.value)


@pytest.mark.parametrize(
    "url", ["https://api.example.com/v1", "http://127.0.0.1:8080", "${BASE}", "https://${HOST}/v1"]
)
def test_good_and_templated_base_urls_load(url: str) -> None:
    assert parse_config(f'[providers.x]\nbase_url = "{url}"\n').providers["x"].base_url == url


def test_values_that_resolve_are_used_without_scanning_the_file_for_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A key's line is for an error message: finding it scans the whole file, which every run paid for nothing."""
    text = '[providers.x]\nbase_url = "${BASE}"\napi_key = "${KEY}"\nheaders = { h = "${H}" }\n'
    config = parse_config('database = "${DB}/ledger.db"\n' + text)
    monkeypatch.delenv("NEXUS_DATABASE_URL", raising=False)
    monkeypatch.setenv("DB", str(tmp_path))

    def no_scan(text: str) -> None:
        raise AssertionError("the file was scanned for a key's line, and no error needed it")

    monkeypatch.setattr("nexus.config._toml_lines.key_lines", no_scan)
    settings = provider_settings(config, "x", {"BASE": "http://127.0.0.1:1/v1", "KEY": "k", "H": "v"})
    assert settings.base_url == "http://127.0.0.1:1/v1"
    assert (settings.profiles[0].api_key, settings.headers) == ("k", (("h", "v"),))
    assert config.database_target == tmp_path / "ledger.db"
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"nexus.toml:4: providers\.x\.api_key uses \$\{KEY\}"):
        provider_settings(config, "x", {"BASE": "http://127.0.0.1:1/v1", "H": "v"})  # an error still says where


def test_templated_base_url_is_checked_once_resolved() -> None:
    config = parse_config('[providers.x]\nbase_url = "${BASE}"\n')
    assert provider_settings(config, "x", {"BASE": "http://127.0.0.1:1/v1/"}).base_url == "http://127.0.0.1:1/v1"
    with pytest.raises(ConfigError, match=r"nexus.toml:2: providers\.x\.base_url: 'ftp://h' is not an http"):
        provider_settings(config, "x", {"BASE": "ftp://h"})


def test_base_url_from_the_environment_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="the environment variable X_BASE_URL: 'nope' is not an http"):
        provider_settings(parse_config(""), "x", {"X_BASE_URL": "nope"})


# --------------------------------------------------------------------------- [providers.local.models.<id>] (item 18)


def test_local_model_settings_that_would_do_nothing_are_errors() -> None:
    text = (
        "[providers.local.models.smollm2-135m-instruct]\nmax_tokens = 5000\ncontext_window = 9000\n"
        "[providers.local.models.smollm2]\nmax_tokens = 10\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    message = str(info.value)
    assert "nexus.toml:2: providers.local.models.smollm2-135m-instruct.max_tokens: must be smaller" in message
    assert "nexus.toml:3: providers.local.models.smollm2-135m-instruct.context_window: has no effect" in message
    assert "set n_ctx in [local] instead" in message
    assert "nexus.toml:4: providers.local.models.smollm2: no local model is called 'smollm2'" in message


def test_local_max_tokens_and_prompt_profile_are_accepted() -> None:
    config = parse_config(
        '[providers.local.models.smollm2-135m-instruct]\nmax_tokens = 2048\nprompt_profile = "full"\n'
    )
    assert config.providers["local"].models["smollm2-135m-instruct"].max_tokens == 2048


# --------------------------------------------------------------------------- prompt profile (item 21)


def test_prompt_profile_defaults_to_minimal_only_for_the_bundled_model() -> None:
    assert prompt_profile(parse_config(""), "local", "smollm2-135m-instruct") == "minimal"
    own = parse_config('[local]\nmodel_id = "mine"\nmodel_path = "/m.gguf"\n')
    assert prompt_profile(own, "local", "mine") == "full"
    assert prompt_profile(parse_config(""), "openai", "gpt-4o-mini") == "full"


def test_prompt_profile_setting_overrides_the_default() -> None:
    text = (
        '[providers.local.models.smollm2-135m-instruct]\nprompt_profile = "full"\n'
        '[providers.ollama.models.tiny]\nprompt_profile = "minimal"\n'
    )
    config = parse_config(text)
    assert prompt_profile(config, "local", "smollm2-135m-instruct") == "full"
    assert prompt_profile(config, "ollama", "tiny") == "minimal"
    with pytest.raises(ConfigError, match="prompt_profile"):
        parse_config('[providers.x.models.m]\nprompt_profile = "short"\n')


# --------------------------------------------------------------------------- the event relay's batch and bound


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("events_log_flush_ms = 0", "events_log_flush_ms"),
        ("events_log_flush_ms = 5000", "events_log_flush_ms"),
        ("events_log_max_rows = 10", "events_log_max_rows"),
        ('events_log_max_rows = "many"', "events_log_max_rows"),
    ],
)
def test_a_bad_event_log_setting_is_refused_at_load_naming_it(line: str, problem: str) -> None:
    text = f'default_model = "openai/gpt-4o-mini"\n\n[server]\n{line}\n'
    with pytest.raises(ConfigError) as info:
        parse_config(text, "my.toml")
    assert problem in str(info.value) and "my.toml" in str(info.value)


def test_the_event_log_settings_default_to_the_relay_s_own() -> None:
    from nexus.server._event_relay import FLUSH_S

    server = parse_config('default_model = "openai/gpt-4o-mini"\n', "my.toml").server
    assert server.events_log_flush_ms == round(FLUSH_S * 1000) and server.events_log_max_rows == 100_000
    tuned = parse_config("[server]\nevents_log_flush_ms = 50\nevents_log_max_rows = 5000\n", "my.toml").server
    assert (tuned.events_log_flush_ms, tuned.events_log_max_rows) == (50, 5000)
