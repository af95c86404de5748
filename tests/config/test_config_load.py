"""Loading nexus.toml: defaults, strict validation, error messages that name the key and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.config import NexusConfig, config_path, load_config, nexus_home, parse_config
from nexus.config._toml_lines import key_lines, line_of
from nexus.errors import ConfigError, NexusError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "nexus.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "nexus.toml")
    return str(info.value)


def test_paths_follow_nexus_home(isolated_env: Path) -> None:
    assert nexus_home() == isolated_env
    assert config_path() == isolated_env / "nexus.toml"
    assert nexus_home({"NEXUS_HOME": "/srv/nx"}) == Path("/srv/nx")
    assert nexus_home({}) == Path.home() / ".nexus"
    assert config_path({"NEXUS_HOME": "/a", "NEXUS_CONFIG": "/b/c.toml"}) == Path("/b/c.toml")


def test_no_file_gives_defaults(isolated_env: Path) -> None:
    config = load_config()
    assert config.source is None
    assert config.default_model is None
    assert config.thinking == "off"
    assert config.agent.max_iterations == 25
    assert config.agent.max_retries == 3
    assert config.agent.max_tool_result_chars == 60_000
    assert config.agent.bash_timeout_s == 120
    assert config.agent.subagent_max_depth == 3
    assert config.local.n_ctx == 4096
    assert config.workspace_path == isolated_env / "workspace"
    assert config.database_path == isolated_env / "agents.db"


def test_the_workspace_path_follows_what_it_is_made_of(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is kept between runs, but a moved ``$NEXUS_HOME`` (for a config not loaded from a home),
    ``$HOME`` or a copy's workspace is seen."""
    loaded, free = load_config(), NexusConfig()
    assert loaded.workspace_path == free.workspace_path == isolated_env / "workspace"
    monkeypatch.setenv("NEXUS_HOME", str(isolated_env / "other"))
    assert free.workspace_path == isolated_env / "other" / "workspace"
    assert loaded.workspace_path == isolated_env / "workspace"  # its home is the one it was loaded from
    assert loaded.model_copy(update={"workspace": "ws"}).workspace_path == isolated_env / "ws"
    monkeypatch.setenv("HOME", str(isolated_env / "me"))
    assert loaded.model_copy(update={"workspace": "~/ws"}).workspace_path == isolated_env / "me" / "ws"
    assert free.workspace_path == isolated_env / "other" / "workspace"


def test_full_file_is_read(isolated_env: Path) -> None:
    path = _write(
        isolated_env,
        """
default_model = "anthropic/claude-sonnet-4-5"
thinking = "low"
fallbacks = ["openai/gpt-4o-mini", "local/smollm2-135m-instruct"]
workspace = "ws"
database = "/tmp/elsewhere.db"

[agent]
max_iterations = 7
llm_timeout_s = 30          # an int where a float is expected is fine
compaction_reserve_tokens = 1000

[providers.openai]
base_url = "http://127.0.0.1:9999/v1"
api_key = "${MY_KEY}"
headers = { "X-Team" = "core" }

[providers.openai.models."gpt-4o-mini"]
context_window = 128000
input_price = 0.15

[local]
n_ctx = 2048
n_threads = 2
""",
    )
    config = load_config()
    assert config.source == path
    assert config.default_model == "anthropic/claude-sonnet-4-5"
    assert config.fallbacks == ["openai/gpt-4o-mini", "local/smollm2-135m-instruct"]
    assert config.agent.max_iterations == 7
    assert config.agent.llm_timeout_s == 30.0
    assert config.workspace_path == isolated_env / "ws"
    assert config.database_path == Path("/tmp/elsewhere.db")
    openai = config.providers["openai"]
    assert openai.headers == {"X-Team": "core"}
    assert [p.name for p in openai.profiles()] == ["default"]
    assert openai.profiles()[0].api_key == "${MY_KEY}"  # substituted only when used
    assert openai.models["gpt-4o-mini"].context_window == 128000
    assert config.local.n_ctx == 2048


def test_example_file_from_docs_loads() -> None:
    example = DOCS / "nexus.example.toml"
    config = load_config(example)
    assert config.source == example
    assert config.default_model is not None
    assert config.providers, "the example shows providers"
    assert any(len(p.auth_profiles) > 1 for p in config.providers.values()), "the example shows auth profiles"


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_missing_file_named_by_the_environment_is_an_error(tmp_path: Path) -> None:
    env = {"NEXUS_HOME": str(tmp_path), "NEXUS_CONFIG": str(tmp_path / "nope.toml")}
    with pytest.raises(ConfigError, match=r"named by \$NEXUS_CONFIG\) not found: .*unset NEXUS_CONFIG"):
        load_config(env=env)
    assert load_config(env={"NEXUS_HOME": str(tmp_path)}).source is None  # only the default file may be missing


def test_a_byte_order_mark_is_no_syntax_error_and_a_directory_is_named(tmp_path: Path) -> None:
    # a Windows editor's BOM read as "TOML syntax error (column 1): Invalid statement"; a directory was
    # "cannot read ... fix its permissions or encoding"
    file = tmp_path / "bom.toml"
    file.write_text('\ufeffdefault_model = "openai/gpt-4o"\n', encoding="utf-8")
    assert load_config(file).default_model == "openai/gpt-4o"
    with pytest.raises(ConfigError, match=rf"config file {tmp_path} is a directory: name the file in it"):
        load_config(tmp_path)


def test_unknown_key_names_path_line_and_suggestion() -> None:
    message = _error('default_model = "openai/gpt-4o"\n\n[agent]\nmax_iterations = 5\nmax_retrys = 2\n')
    assert "nexus.toml:5: agent.max_retrys: unknown key 'max_retrys'" in message
    assert "did you mean 'max_retries'?" in message


def test_wrong_type_names_path_line_and_fix() -> None:
    message = _error('[agent]\n# comment\nmax_iterations = "25"\n')
    assert "nexus.toml:3: agent.max_iterations" in message
    assert "valid integer" in message
    assert "whole number without quotes" in message


def test_errors_in_arrays_of_tables_point_at_the_right_entry() -> None:
    text = """[providers.acme]
base_url = "http://127.0.0.1:1/v1"

[[providers.acme.auth_profiles]]
name = "one"
api_key = "a"

[[providers.acme.auth_profiles]]
name = "two"
api_key = 42
"""
    message = _error(text)
    assert "nexus.toml:10: providers.acme.auth_profiles[1].api_key" in message
    assert "valid string" in message


def test_secret_values_are_not_echoed() -> None:
    message = _error('[providers.openai]\napi_kye = "sk-verysecret"\n')
    assert "nexus.toml:2: providers.openai.api_kye" in message
    assert "sk-verysecret" not in message


def test_quoted_and_dotted_keys_are_located() -> None:
    text = 'providers.openai.base_url = "x"\n[providers.openai.models."gpt-4o"]\ncontext_window = "big"\n'
    message = _error(text)
    assert 'nexus.toml:3: providers.openai.models."gpt-4o".context_window' in message or (
        "nexus.toml:3: providers.openai.models.gpt-4o.context_window" in message
    )


def test_bad_model_ref_and_bad_enum() -> None:
    message = _error('default_model = "gpt-4o"\nthinking = "max"\n')
    assert "nexus.toml:1: default_model: expected 'provider/model'" in message
    assert "nexus.toml:2: thinking" in message and "'off'" in message


def test_api_key_and_profiles_together_is_an_error() -> None:
    text = '[providers.openai]\napi_key = "a"\nauth_profiles = [{ name = "x", api_key = "b" }]\n'
    message = _error(text)
    assert "nexus.toml:1: providers.openai: give either api_key" in message


def test_unknown_tool_group_is_an_error() -> None:
    message = _error('[tools]\ndeny = ["group:everything"]\n')
    assert "nexus.toml:2: tools.deny: unknown tool group 'group:everything'" in message


def test_constraint_violation() -> None:
    message = _error("[local]\nn_ctx = 0\n")
    assert "nexus.toml:2: local.n_ctx" in message and "greater than 0" in message


def test_toml_syntax_error_has_file_and_line(isolated_env: Path) -> None:
    path = _write(isolated_env, 'default_model = "a/b"\n\n[agent\nmax_iterations = 3\n')
    with pytest.raises(ConfigError) as info:
        load_config()
    assert f"{path}:3: TOML syntax error" in str(info.value)
    assert isinstance(info.value, NexusError)


def test_line_locator_handles_multiline_values() -> None:
    text = 'a = """\n[fake]\nb = 1\n"""\nlist = [\n  "x",\n  "y",\n]\n[real]\nc = 2\n'
    lines = key_lines(text)
    assert lines[("a",)] == 1
    assert ("fake",) not in lines and ("b",) not in lines
    assert lines[("real", "c")] == 10
    assert line_of(lines, ("real", "c", "deeper")) == 10
    assert line_of(lines, ("missing",)) is None
