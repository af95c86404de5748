"""``[mcp.servers.<name>]`` validation, tool names and which servers a run needs (no server is started)."""

from __future__ import annotations

import pytest

from nexus.config import parse_config
from nexus.config._tool_names import expand_tool_patterns, mcp_tool_name, rule_allows, unknown_tool_entries
from nexus.errors import ConfigError
from nexus.mcp._needed import servers_for


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return str(caught.value)


def test_a_command_server_and_a_url_server_load_with_their_transport() -> None:
    config = parse_config(
        """
[mcp.servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"]
env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
tools = ["read_*"]
[mcp.servers.web]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${WEB_TOKEN}" }
[mcp.servers.old]
url = "https://old.example.com/sse"
transport = "sse"
enabled = false
"""
    )
    servers = config.mcp.servers
    assert [servers["fs"].kind, servers["web"].kind, servers["old"].kind] == ["stdio", "http", "sse"]
    assert list(config.mcp.enabled()) == ["fs", "web"]
    assert servers["fs"].timeout_s == 60.0 and servers["fs"].start_timeout_s == 30.0


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('[mcp.servers.Fs]\ncommand = "x"', "MCP server name 'Fs' is not usable"),
        ('[mcp.servers.a__b]\ncommand = "x"', "no '__'"),
        ('[mcp.servers.fs]\nargs = ["x"]', "give exactly one of command"),
        ('[mcp.servers.fs]\ncommand = "x"\nurl = "https://a"', "give exactly one of command"),
        ('[mcp.servers.fs]\ncommand = "  "', "command is empty"),
        ('[mcp.servers.fs]\nurl = "ftp://a"', "is not an http:// or https:// URL"),
        ('[mcp.servers.fs]\nurl = "https://a"\nenv = { A = "b" }', "a url server takes headers"),
        ('[mcp.servers.fs]\ncommand = "x"\nheaders = { A = "b" }', "headers are for url servers"),
        ('[mcp.servers.fs]\ncommand = "x"\ntransport = "sse"', 'transport = "sse" needs a url'),
        ('[mcp.servers.fs]\ncommand = "x"\ntimeout_s = 0', "mcp.servers.fs.timeout_s"),
        ('[mcp.servers.fs]\ncommand = "x"\ntimout_s = 3', "did you mean 'timeout_s'?"),
        ('[mcp.servers.fs]\ncommand = "x"\ntools = [""]', "empty or non-text entry"),
    ],
)
def test_a_bad_server_table_is_refused_naming_the_problem(table: str, expected: str) -> None:
    assert expected in _error(table)


def test_a_credential_in_args_is_refused_because_every_user_can_read_argv() -> None:
    message = _error('[mcp.servers.gh]\ncommand = "gh-mcp"\nargs = ["--token", "${GITHUB_TOKEN}"]')
    assert "${GITHUB_TOKEN}, a credential" in message and "ps" in message
    assert 'env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }' in message
    parse_config('[mcp.servers.fs]\ncommand = "x"\nargs = ["${HOME}/notes"]')  # not a credential: fine


def test_tool_lists_may_name_configured_servers_tools_and_groups_only() -> None:
    base = '[mcp.servers.fs]\ncommand = "x"\n'
    parse_config(base + '[tools]\nallow = ["read", "fs__read_file", "mcp:fs", "mcp:fs/read_*", "mcp:*"]')
    message = _error(base + '[tools]\ndeny = ["gh__create_issue", "mcp:fss/x"]')
    assert "'gh__create_issue' names MCP server 'gh', which is not in [mcp.servers]" in message
    assert "did you mean 'fs'?" in message
    assert "malformed entry 'mcp:fs/'" in _error(base + '[tools]\nallow = ["mcp:fs/"]')


def test_mcp_entries_expand_to_prefixed_globs_that_match_like_any_entry() -> None:
    assert expand_tool_patterns(["mcp:fs", "mcp:fs/read.*", "MCP:Web/x", "mcp:*"]) == [
        "fs__*",
        "fs__read_*",
        "web__x",
        "*__*",
    ]
    assert rule_allows("fs__read_file", ["mcp:fs/read_*"], [])
    assert not rule_allows("fs__write_file", ["mcp:fs/read_*"], [])
    assert not rule_allows("fs__read_file", [], ["mcp:fs"])
    assert not rule_allows("read", ["mcp:*"], [])  # built-in tools have no server prefix


def test_model_facing_names_are_prefixed_cleaned_and_short() -> None:
    assert mcp_tool_name("fs", "read_file") == "fs__read_file"
    assert mcp_tool_name("gh", "repos.list/all") == "gh__repos_list_all"
    long = mcp_tool_name("server", "t" * 100)
    assert len(long) == 64 and long.startswith("server__ttt")
    assert long != mcp_tool_name("server", "t" * 99)  # the hash keeps different long names apart
    assert unknown_tool_entries(["fs__anything", "mcp:fs/x"], mcp_servers=["fs"]) == []


def test_a_run_needs_only_the_servers_its_policy_could_allow() -> None:
    config = parse_config(
        """
[mcp.servers.fs]
command = "x"
[mcp.servers.gh]
command = "y"
[mcp.servers.off]
command = "z"
enabled = false
[tools]
deny = ["mcp:gh/delete_*"]
[tools.roles.worker]
deny = ["gh__*"]
[tools.sessions.reader]
allow = ["read", "fs__read_*"]
"""
    )
    assert servers_for(config) == ["fs", "gh"]  # a partial deny leaves gh's other tools
    assert servers_for(config, role="worker") == ["fs"]
    assert servers_for(config, session_label="reader") == ["fs"]
    assert servers_for(config, agent_tools=["read", "bash"]) == []  # `nexus run` of such an agent starts none
    assert servers_for(config, agent_tools=["mcp:gh"]) == ["gh"]
    assert servers_for(config, agent_tools=["*"]) == ["fs", "gh"]
    assert servers_for(config, agent_tools=["f*"]) == ["fs"]
    assert servers_for(config, agent_tools=[]) == []
