"""The ``nexus mcp`` subcommands (argparse only; the handlers are imported when a command runs)."""

from __future__ import annotations

import argparse

_HANDLER = "nexus.cli.mcp_cmd:mcp_command"

_DESCRIPTION = """\
MCP servers give agents more tools: Nexus starts (or connects to) each server in
[mcp.servers.<name>] of nexus.toml when a run could use it, and offers its tools as
<name>__<tool> under the same tool policy as the built-in tools. `nexus mcp serve` is the
other direction: it lets any MCP client (Claude Desktop, Cursor, …) talk to Nexus agents.
See docs/mcp.md.
"""

_EPILOG = """\
examples:
  nexus mcp add fs --command "npx -y @modelcontextprotocol/server-filesystem ~/notes"
  nexus mcp add gh --command "github-mcp-server stdio" --env GITHUB_PERSONAL_ACCESS_TOKEN
  nexus mcp add search --url https://mcp.example.com/mcp --header "Authorization: Bearer ${SEARCH_TOKEN}"
  nexus mcp tools fs            # start it and list its tools as agents see them
  nexus mcp list
  nexus mcp rm fs
  nexus mcp serve               # Nexus agents as MCP tools, over stdio
"""


def add_mcp(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    summary: str,
    formatter: type[argparse.HelpFormatter],
) -> None:
    """Add ``nexus mcp add|list|rm|tools|serve``."""
    sub = commands.add_parser("mcp", help=summary, description=_DESCRIPTION, epilog=_EPILOG, formatter_class=formatter)
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True
    _add_add(actions)

    listing = actions.add_parser("list", help="the configured servers (nothing is started)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(handler=_HANDLER)

    remove = actions.add_parser("rm", help="remove a server from nexus.toml")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=_HANDLER)

    tools = actions.add_parser("tools", help="start a server and list its tools as agents see them")
    tools.add_argument("name", metavar="NAME")
    tools.add_argument("--json", action="store_true", help="print JSON instead of text")
    tools.set_defaults(handler=_HANDLER)

    serve = actions.add_parser(
        "serve",
        help="serve Nexus agents to an MCP client over stdio (Claude Desktop, Cursor, …)",
        description=(
            "Speak MCP on stdin/stdout: the client can list the agents, send one a message and wait\n"
            "for the reply (with progress while it streams), read sessions' history and fork them.\n"
            "Messages go through the broker's durable queues, as with `nexus send`. Logs go to stderr."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.set_defaults(handler="nexus.cli.mcp_serve_cmd:mcp_serve_command")


def _add_add(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add = actions.add_parser(
        "add",
        help="add (or replace) a server in nexus.toml, then start it once to list its tools",
        description=(
            "Add [mcp.servers.NAME] to nexus.toml. A command server: --command, the program and its\n"
            "arguments as one string (split like a shell). A remote server: --url. Secrets are never\n"
            "written to the file: --env VAR\n"
            "stores ${VAR} (read from the environment when the server starts), and a header or env value\n"
            "that holds a credential must be written as ${VAR} too."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name", metavar="NAME", help="lower-case letters, digits, - and _; tools become NAME__tool")
    how = add.add_mutually_exclusive_group(required=True)
    how.add_argument("--command", metavar="CMD", help='the program and its arguments, e.g. "npx -y some-mcp-server"')
    how.add_argument("--url", help="a streamable-HTTP (or, with --transport sse, SSE) endpoint")
    add.add_argument(
        "--transport", choices=("stdio", "http", "sse"), help="default: stdio for a command, http for --url"
    )
    add.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR[=VALUE]",
        help="an environment variable for the program (VAR alone: ${VAR}, read when it starts)",
    )
    add.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header")
    add.add_argument("--cwd", help="the program's working directory (default: the agents' workspace)")
    add.add_argument("--tools", nargs="+", metavar="GLOB", help="offer only these of its tools (default: all)")
    add.add_argument("--timeout", type=float, metavar="S", help="seconds one tool call may take (default 60)")
    add.add_argument("--start-timeout", type=float, metavar="S", help="seconds starting may take (default 30)")
    add.add_argument("--disabled", action="store_true", help="write it with enabled = false")
    add.add_argument("--no-check", action="store_true", help="do not start the server to list its tools")
    add.set_defaults(handler=_HANDLER)
