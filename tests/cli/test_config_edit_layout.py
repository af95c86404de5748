"""A table a command adds to ``nexus.toml`` sits between blank lines; the rest of the file is left as written.

An outside trial: ``nexus adapters enable`` and ``nexus mcp add`` inserted a table before the user's next
one with no blank line after it (``enabled = true`` ran straight into ``[broker]``), and a replaced MCP
server left two blank lines where there had been one.
"""

from __future__ import annotations

from pathlib import Path

import tomlkit

from nexus.cli._config_edit import _tidy, table

from .cli_process import RunNexus

USER_FILE = """\
# my settings
default_model = "openai/gpt-4o-mini"  # the cheap one

[adapters.files]
builtin = "jsonl"

[adapters.files.accounts.a]
enabled = true
# the broker, tuned by hand
[broker]
max_concurrent = 2
"""


def test_enable_and_mcp_add_leave_one_blank_line_around_each_new_table(nexus: RunNexus, isolated_env: Path) -> None:
    config = isolated_env / "nexus.toml"
    isolated_env.mkdir(parents=True, exist_ok=True)
    config.write_text(USER_FILE)
    done = nexus("adapters", "enable", "files/b", "--set", "path=/dev/null")
    assert done.returncode == 0, done.stderr
    assert config.read_text() == USER_FILE.replace(
        "enabled = true\n# the broker",
        "enabled = true\n\n[adapters.files.accounts.b]\nenabled = true\n\n[adapters.files.accounts.b.config]\n"
        'path = "/dev/null"\n\n# the broker',
    )  # the comment above [broker] stays above it

    config.write_text('[mcp.servers.a]\ncommand = "a"\n\n[broker]\nmax_concurrent = 2\n')
    assert nexus("mcp", "add", "fs", "--command", "true", "--no-check").returncode == 0
    assert config.read_text() == (
        '[mcp.servers.a]\ncommand = "a"\n\n[mcp.servers.fs]\ncommand = "true"\n\n[broker]\nmax_concurrent = 2\n'
    )


def _edited(text: str, change: object) -> str:
    document = tomlkit.parse(text)
    change(document)  # type: ignore[operator]
    return _tidy(text, tomlkit.dumps(document), document)


def _add_server(document: tomlkit.TOMLDocument) -> None:
    servers = table(table(document, "mcp"), "servers")
    if "a" in servers:
        del servers["a"]
    servers["a"] = tomlkit.table()
    servers["a"]["command"] = "new"


def test_a_replaced_table_and_a_file_without_a_final_newline() -> None:
    assert _edited('[broker]\nmax_concurrent = 2\n\n[mcp.servers.a]\ncommand = "old"\n', _add_server) == (
        '[broker]\nmax_concurrent = 2\n\n[mcp.servers.a]\ncommand = "new"\n'
    )  # one blank line, not the old one beside the new one
    assert _edited("[broker]\nmax_concurrent = 2", _add_server) == (
        '[broker]\nmax_concurrent = 2\n\n[mcp.servers.a]\ncommand = "new"\n'
    )
    assert _edited("[broker]\nmax_concurrent = 2\n\n\n", _add_server) == (
        '[broker]\nmax_concurrent = 2\n\n[mcp.servers.a]\ncommand = "new"\n'
    )
    assert _edited("", _add_server) == '[mcp.servers.a]\ncommand = "new"\n'


def test_keys_set_in_an_existing_table_get_no_blank_lines() -> None:
    def monitor(document: tomlkit.TOMLDocument) -> None:
        document["adapters"]["x"]["accounts"]["a"]["monitor"] = True  # type: ignore[index]

    text = "[adapters.x.accounts.a]\nenabled = true\n[broker]\nmax_concurrent = 2\n"
    assert _edited(text, monitor) == text.replace("enabled = true\n", "enabled = true\nmonitor = true\n")


def test_a_crlf_file_keeps_its_line_ends() -> None:
    edited = _edited("[broker]\r\nmax_concurrent = 2\r\n", _add_server)
    assert edited == '[broker]\r\nmax_concurrent = 2\r\n\r\n[mcp.servers.a]\r\ncommand = "new"\r\n'
