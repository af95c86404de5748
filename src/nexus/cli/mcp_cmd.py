"""``nexus mcp add|list|rm|tools``: the MCP servers of ``nexus.toml`` and the tools they give agents.

``add`` and ``rm`` edit the file in place (:mod:`nexus.cli._config_edit`: comments kept, the result
checked by the strict loader, written atomically). Secrets never reach the file or argv: ``--env
VAR`` stores ``${VAR}``, and a credential-looking env or header value must be a ``${VAR}``.
``add`` then starts the server once and lists its tools, so a typo in the command shows at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from nexus.cli._config_edit import edit, first_problem, load, table
from nexus.errors import ConfigError, UsageError


def mcp_command(args: argparse.Namespace) -> int:
    """Dispatch ``nexus mcp ACTION``."""
    action = {"add": _add, "list": _list, "rm": _remove, "tools": _tools}[args.action]
    return action(args)


# -- add -----------------------------------------------------------------------------------------


def _add(args: argparse.Namespace) -> int:
    from nexus.config import McpServerConfig, check_server_name

    try:
        check_server_name(args.name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    fields = _server_fields(args)
    try:
        McpServerConfig.model_validate(fields)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ConfigError(f"mcp server {args.name}: {first_problem(exc)}") from None

    if not (args.no_check or args.disabled):
        _need_the_mcp_extra()

    def change(document: Any) -> None:
        servers = table(table(document, "mcp"), "servers")
        if args.name in servers:
            del servers[args.name]
        servers[args.name] = _toml_table(fields)

    path = edit(args, change)
    print(f"added MCP server {args.name} to {path}")
    if args.no_check or args.disabled:
        return 0
    try:
        tools = asyncio.run(_listing(load(args), args.name))
    except ConfigError:
        raise
    except Exception as exc:
        print(f"nexus: {exc}", file=sys.stderr)
        print(f"nexus: it is in {path}; fix it, then `nexus mcp tools {args.name}`", file=sys.stderr)
        return 1
    print(f"{len(tools)} tool(s) offered to agents: {', '.join(t.name for t in tools) or '(none)'}")
    return 0


def _need_the_mcp_extra() -> None:
    """Refuse before writing when the ``mcp`` package is missing: a server added then could not start, and
    every later run would warn about it (add with ``--no-check`` to write it anyway)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "the mcp package is not installed: pip install 'nexus-broker[mcp]' (nothing was written; "
            "--no-check adds the server without starting it)"
        ) from None


def _server_fields(args: argparse.Namespace) -> dict[str, Any]:
    import shlex

    try:
        command = shlex.split(args.command) if args.command else []
    except ValueError as exc:
        raise UsageError(f"--command {args.command!r}: {exc} (quote it as you would in a shell)") from None
    if args.command is not None and not command:
        raise UsageError("--command is empty: give the program to start and its arguments")
    _refuse_secret_in_argv(command)
    fields: dict[str, Any] = {"command": command[0], "args": command[1:]} if command else {"url": args.url}
    if not fields.get("args", True):
        del fields["args"]
    env = dict(_env_entry(entry) for entry in args.env)
    headers = dict(_header_entry(entry) for entry in args.header)
    for key, value in (("env", env), ("headers", headers)):
        if value:
            fields[key] = value
    optional = {
        "transport": args.transport,
        "cwd": args.cwd,
        "tools": args.tools,
        "timeout_s": args.timeout,
        "start_timeout_s": args.start_timeout,
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    if args.disabled:
        fields["enabled"] = False
    return fields


def _env_entry(entry: str) -> tuple[str, str]:
    name, sep, value = entry.partition("=")
    if not name.strip():
        raise UsageError(f"--env {entry!r}: expected VAR or VAR=VALUE")
    if not sep:
        return name, f"${{{name}}}"
    _refuse_literal_secret(f"--env {name}", name, value, f"--env {name} (its value is read when the server starts)")
    return name, value


def _header_entry(entry: str) -> tuple[str, str]:
    name, sep, value = entry.partition(":")
    if not sep or not name.strip():
        raise UsageError(f"--header {entry!r}: expected 'NAME: VALUE', e.g. 'Authorization: Bearer ${{TOKEN}}'")
    name, value = name.strip(), value.strip()
    _refuse_literal_secret(f"--header {name}", name, value, f"'{name}: Bearer ${{TOKEN}}' with TOKEN exported")
    return name, value


def _refuse_secret_in_argv(argv: list[str]) -> None:
    """A credential in the command line would land in nexus.toml and in every ``ps`` listing: refuse one
    shaped like a key (``ghp_…``, ``sk-…``), which ``--env`` and ``--header`` already refused."""
    from nexus.llm import key_shaped

    for place, arg in enumerate(argv):
        if key_shaped(arg):
            raise UsageError(
                f"--command: {'the program' if place == 0 else f'argument {place}'} looks like a credential; "
                "a process's arguments are readable by every user (ps) and nexus.toml never holds one: pass it "
                "with --env VAR (the server reads VAR when it starts), or as a header for a --url server"
            )


def _refuse_literal_secret(what: str, name: str, value: str, instead: str) -> None:
    """A credential written literally would land in nexus.toml (and in shell history): refuse it."""
    from nexus.config import env_references
    from nexus.llm import key_shaped, secret_name

    if (secret_name(name) or key_shaped(value)) and not env_references(value):
        raise UsageError(f"{what}: the value looks like a credential; nexus.toml never holds one: use {instead}")


def _toml_table(fields: dict[str, Any]) -> Any:
    import tomlkit

    out = tomlkit.table()
    for key, value in fields.items():
        out[key] = tomlkit.inline_table() if isinstance(value, dict) else value
        if isinstance(value, dict):
            out[key].update(value)
    return out


# -- list, rm ------------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    from nexus.llm import redact

    config = load(args)
    rows = [
        {
            "name": name,
            "enabled": server.enabled,
            "transport": server.kind,
            "target": redact(" ".join([server.command, *server.args]) if server.command else server.url),
            "tools": server.tools or ["*"],
        }
        for name, server in config.mcp.servers.items()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print('no MCP servers: add one with `nexus mcp add NAME --command "PROGRAM ARGS..."` or `--url URL`')
        return 0
    for row in rows:
        state = "" if row["enabled"] else "  (disabled)"
        print(f"{row['name']:<16} {row['transport']:<5} {row['target']}{state}")
        if row["tools"] != ["*"]:
            print(f"{'':<16} tools: {', '.join(row['tools'])}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    config = load(args)
    if args.name not in config.mcp.servers:
        known = ", ".join(config.mcp.servers) or "none"
        raise ConfigError(f"no MCP server named {args.name!r} in nexus.toml (configured: {known})")

    def change(document: Any) -> None:
        del document["mcp"]["servers"][args.name]

    path = edit(args, change)
    print(f"removed MCP server {args.name} from {path}")
    return 0


# -- tools ---------------------------------------------------------------------------------------


def _tools(args: argparse.Namespace) -> int:
    config = load(args)
    server = config.mcp.servers.get(args.name)
    if server is None:
        known = ", ".join(config.mcp.servers) or "none"
        raise ConfigError(f"no MCP server named {args.name!r} in nexus.toml (configured: {known})")
    if not server.enabled:
        raise ConfigError(f"MCP server {args.name} is disabled (enabled = false in nexus.toml)")
    tools = asyncio.run(_listing(config, args.name))
    if args.json:
        rows = [{"name": t.name, "tool": t.metadata["mcp_tool"], "description": t.description} for t in tools]
        print(json.dumps(rows, indent=2))
        return 0
    for tool in tools:
        summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        print(f"{tool.name:<40} {summary[:100]}")
    if not tools:
        print(f"MCP server {args.name} offers no tools (check its tools = [...] globs)")
    return 0


async def _listing(config: Any, name: str) -> list[Any]:
    """Start server ``name``, take its tools (cut to its ``tools`` globs), stop it."""
    from nexus.mcp import McpServers

    servers = McpServers(config)
    try:
        await servers.connection(name).ensure()
        return servers.tools([name])
    finally:
        await servers.close()
