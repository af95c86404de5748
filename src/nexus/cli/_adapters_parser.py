"""The ``nexus adapters`` subcommands (argparse only; the handler is imported when the command runs)."""

from __future__ import annotations

import argparse

from nexus.cli._input import env_var_name

_HANDLER = "nexus.cli.adapters_cmd:adapters_command"

_DESCRIPTION = """\
Adapters connect agents to chat platforms: executables in any language that speak JSON on
stdio (docs/adapters.md). Nexus ships console, jsonl and telegram; register your own with
--command. Settings live under [adapters.<name>] in nexus.toml, which these commands edit.
"""

_EPILOG = """\
examples:
  nexus adapters register tg --builtin telegram
  nexus adapters enable tg/main --credential-env TELEGRAM_BOT_TOKEN --monitor --agent assistant
  nexus adapters register outbox --command "python3 examples/adapters/outbox_adapter.py"
  nexus adapters health
  nexus adapters test tg/main --to chat:123456 "hello from nexus"
  nexus adapters monitor      # chat messages in, replies back (nexus serve does it too)
"""


def add_adapters(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    summary: str,
    formatter: type[argparse.HelpFormatter],
) -> None:
    """Add ``nexus adapters register|list|enable|disable|health|test|monitor``."""
    sub = commands.add_parser(
        "adapters",
        help=summary,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=formatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True

    _add_register_and_enable(actions)

    disable = actions.add_parser("disable", help="disable an account (kept in nexus.toml)")
    disable.add_argument("ref", metavar="NAME/ACCOUNT")
    disable.set_defaults(handler=_HANDLER)

    health = actions.add_parser("health", help="run every enabled account's health check")
    health.add_argument("--json", action="store_true", help="print JSON instead of a table")
    health.set_defaults(handler=_HANDLER)

    test = actions.add_parser("test", help="deliver a message through an adapter, as a reply would go")
    test.add_argument("ref", metavar="NAME/ACCOUNT")
    test.add_argument("--to", required=True, metavar="TARGET", help="the platform address, e.g. chat:123")
    test.add_argument("--thread", metavar="ID", help="thread to post in")
    test.add_argument("--reply-to", metavar="ID", help="message to reply to")
    test.add_argument("text", metavar="TEXT", help="the message")
    test.set_defaults(handler=_HANDLER)

    monitor = actions.add_parser(
        "monitor",
        help="run the broker with every monitored account: chat messages in, replies back (no HTTP API)",
        description=(
            "Start the broker and the monitor of every enabled account with monitor = true. Each\n"
            "inbound message goes to the account's agent in the sender's own session; the reply goes\n"
            "back to the same chat. nexus serve does the same beside its HTTP API. Runs until Ctrl-C."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    monitor.set_defaults(handler="nexus.cli.monitor_cmd:monitor_command")


def _add_register_and_enable(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``register`` (an adapter into nexus.toml), ``list``, ``enable`` (an account, with its monitor and agent)."""
    register = actions.add_parser("register", help="add an adapter to nexus.toml (runs its `info` first)")
    register.add_argument("name", metavar="NAME", help="the adapter's name in nexus.toml")
    how = register.add_mutually_exclusive_group(required=True)
    how.add_argument("--command", metavar="CMD", help='the executable and its leading arguments, e.g. "./my-adapter"')
    how.add_argument("--builtin", choices=("console", "jsonl", "telegram"), help="a shipped adapter")
    register.add_argument(
        "--mode", choices=("auto", "native", "blocks"), help="stream natively or in blocks (default auto)"
    )
    register.set_defaults(handler=_HANDLER)

    listing = actions.add_parser("list", help="the registered adapters, their capabilities and accounts")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(handler=_HANDLER)

    enable = actions.add_parser("enable", help="enable an account of an adapter (adds it if new)")
    enable.add_argument("ref", metavar="NAME/ACCOUNT")
    enable.add_argument("--monitor", action="store_true", help="also run its monitor (inbound messages)")
    enable.add_argument("--agent", metavar="ID", help="the agent inbound messages go to")
    enable.add_argument(
        "--credential-env",
        metavar="VAR",
        type=env_var_name,
        help="the environment variable holding the account's secret (stored as ${VAR}, never the value)",
    )
    enable.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an account config value")
    enable.set_defaults(handler=_HANDLER)
