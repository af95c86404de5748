"""``[providers.*] api`` and ``[tools]`` names are checked at load: file:line, did-you-mean; one matching rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.config import BUILTIN_TOOL_NAMES, TOOL_GROUPS, ToolPolicy, parse_config
from nexus.engine.assembly.tool_policy import TOOL_GROUPS as ENGINE_GROUPS
from nexus.engine.assembly.tool_policy import filter_tools, is_tool_allowed
from nexus.errors import ConfigError


def test_unknown_wire_api_names_the_line_and_the_known_apis() -> None:
    text = '[providers.foo]\nbase_url = "http://127.0.0.1:9/v1"\napi = "openai-completion"\n'
    with pytest.raises(ConfigError) as info:
        parse_config(text, "n.toml")
    message = str(info.value)
    assert "n.toml:3: providers.foo.api" in message
    assert "did you mean 'openai-completions'" in message and "anthropic-messages" in message
    with pytest.raises(ConfigError, match="unknown wire API 'grpc'"):
        parse_config('[providers.foo]\napi = "grpc"\n')
    with pytest.raises(ConfigError, match=r"providers.foo.models.m.api"):
        parse_config('[providers.foo.models.m]\napi = "grpc"\n')


def test_api_registered_from_python_is_accepted() -> None:
    from nexus.llm.registry import register_api

    async def stream(*_: object) -> None:  # never called: only the name matters here
        return None

    register_api("my-wire-api", stream)  # type: ignore[arg-type]
    config = parse_config('[providers.foo]\napi = "my-wire-api"\n')
    assert config.providers["foo"].api == "my-wire-api"


@pytest.mark.parametrize(
    ("text", "where", "suggestion"),
    [
        ('[tools]\ndeny = ["bsh"]\n', "n.toml:2: tools.deny", "'bash'"),
        ('[tools]\nallow = ["read", "gerp"]\n', "n.toml:2: tools.allow", "'grep'"),
        ('[tools.sessions.main]\ndeny = ["wrte"]\n', "n.toml:2: tools.sessions.main.deny", "'write'"),
        ('[tools.roles.worker]\nallow = ["spawn_agnet"]\n', "n.toml:2: tools.roles.worker.allow", "'spawn_agent'"),
    ],
)
def test_unknown_tool_names_are_errors_with_a_suggestion(text: str, where: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "n.toml")
    message = str(info.value)
    assert where in message and f"did you mean {suggestion}" in message
    assert "strict_names = false" in message


def test_globs_groups_and_case_are_not_names_to_check() -> None:
    config = parse_config('[tools]\nallow = ["group:fs", "mcp_*", "BASH"]\ndeny = ["*patch"]\n')
    policy = config.tools
    assert policy.is_allowed("bash") and policy.is_allowed("Read") and policy.is_allowed("mcp_search")
    assert not policy.is_allowed("apply_patch") and not policy.is_allowed("web_fetch")


def test_strict_names_false_accepts_custom_tools() -> None:
    config = parse_config('[tools]\nstrict_names = false\nallow = ["my_custom_tool"]\n')
    assert config.tools.is_allowed("my_custom_tool") and not config.tools.is_allowed("bash")


def test_config_and_engine_policies_match_the_same_way() -> None:
    assert ENGINE_GROUPS is TOOL_GROUPS
    entries = (["group:read", "B*"], ["ls"])
    policy = ToolPolicy(allow=entries[0], deny=entries[1])
    for name in [*BUILTIN_TOOL_NAMES, "Bash", "READ", "other"]:
        assert policy.is_allowed(name) == is_tool_allowed(name, *entries), name


def test_builtin_tool_names_cover_the_tools_the_engine_offers(tmp_path: Path) -> None:
    from nexus.engine.wiring.spawn import spawn_agent_tool
    from nexus.tools import coding_tools

    offered = {t.name for t in coding_tools(tmp_path)} | {spawn_agent_tool().name}
    assert offered <= set(BUILTIN_TOOL_NAMES)
    grouped = {name for members in TOOL_GROUPS.values() for name in members}
    assert grouped <= set(BUILTIN_TOOL_NAMES)
    assert [t.name for t in filter_tools(list(coding_tools(tmp_path)), deny=["BASH"])] == sorted(
        offered - {"bash", "spawn_agent"}, key=[t.name for t in coding_tools(tmp_path)].index
    )
