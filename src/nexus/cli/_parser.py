"""The argument parser of ``nexus``: every command, option and help text, and nothing else.

Handlers are named as ``"module:function"`` strings and imported only when their command
runs, so building the parser (and ``nexus --help``) costs no more than argparse itself.
"""

from __future__ import annotations

import argparse

from nexus import __version__
from nexus.cli._adapters_parser import add_adapters
from nexus.cli._input import utf8_name as _label

_THINKING = ("off", "minimal", "low", "medium", "high")

_MAIN_EPILOG = """\
examples:
  nexus run "list the files in my workspace"
  nexus run -s project-x -m openai/gpt-4o-mini "summarise README.md"
  echo "what changed?" | nexus run -
  nexus chat -s scratch
  nexus sessions list
  nexus doctor

Configuration lives in $NEXUS_HOME/nexus.toml (default ~/.nexus/nexus.toml); with no file,
ANTHROPIC_API_KEY / OPENAI_API_KEY in the environment are enough. See docs/configuration.md.
exit codes: 0 ok, 1 error, 2 bad arguments or invalid configuration, 130 interrupted.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped descriptions and examples as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    """The full ``nexus`` parser (subcommands set ``handler`` to a lazily imported function)."""
    parser = argparse.ArgumentParser(
        prog="nexus",
        description="Nexus broker: run LLM agents with a persistent ledger of every turn.",
        epilog=_MAIN_EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"nexus {__version__}")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read this config file instead of $NEXUS_CONFIG or $NEXUS_HOME/nexus.toml",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    commands.required = True
    _add_run(commands)
    _add_chat(commands)
    _add_sessions(commands)
    _add_doctor(commands)
    _add_models(commands)
    from nexus.cli._broker_parser import add_agents, add_queue, add_send, add_serve

    add_send(commands)
    add_agents(commands)
    add_queue(commands)
    add_adapters(commands, _Formatter)
    add_serve(commands)
    from nexus.cli._mcp_parser import SUMMARY, add_mcp

    add_mcp(commands, SUMMARY, _Formatter)
    from nexus.cli._db_parser import add_db

    add_db(commands)
    return parser


def _model_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-s",
        "--session",
        metavar="LABEL",
        type=_label,
        default="main",
        help="session label to continue (created if new; default: main)",
    )
    sub.add_argument(
        "-m",
        "--model",
        metavar="PROVIDER/MODEL",
        help="model to use, e.g. anthropic/claude-sonnet-4-5, openai/gpt-4o-mini, local/smollm2-135m-instruct "
        "(default: NEXUS_MODEL, then default_model in nexus.toml, then the first provider with a key, "
        "then the local model if installed)",
    )
    sub.add_argument(
        "--thinking",
        choices=_THINKING,
        metavar="LEVEL",
        help=f"reasoning effort: {', '.join(_THINKING)} (default: thinking in nexus.toml, else off)",
    )


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "run",
        help="send one message to an agent and print its reply",
        description=(
            "Send MESSAGE to the agent of a session, stream the reply to stdout and record the\n"
            "turn in the ledger. Tool activity is reported on stderr. Use - to read the message\n"
            "from stdin."
        ),
        epilog='examples:\n  nexus run "hello"\n  nexus run -s bugfix --json "fix the failing test" > events.jsonl\n',
        formatter_class=_Formatter,
    )
    _model_options(sub)
    sub.add_argument(
        "--json",
        action="store_true",
        help="print the run as JSON lines (one stream event per line, the result last) instead of text",
    )
    sub.add_argument("message", metavar="MESSAGE", help="the message to send, or - to read it from stdin")
    sub.set_defaults(handler="nexus.cli.run_cmd:run_command")


def _add_chat(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "chat",
        help="interactive conversation in the terminal",
        description=(
            "Talk to an agent turn by turn. Every turn is written to the ledger under the session\n"
            "label, so `nexus chat -s LABEL` later continues where you left off.\n"
            "End with Ctrl-D; Ctrl-C stops the current reply."
        ),
        formatter_class=_Formatter,
    )
    _model_options(sub)
    sub.add_argument(
        "--agent",
        metavar="ID",
        help="talk to a named agent (nexus agents add) through its durable queue instead of a session",
    )
    sub.set_defaults(handler="nexus.cli.chat_cmd:chat_command")


def _add_sessions(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "sessions",
        help="list, inspect, fork, compact, export and import sessions",
        description=(
            "Sessions are named pointers into the ledger's tree of turns. Forking creates a new\n"
            "session at any earlier turn (nothing is copied); export/import use the pi-coding-agent\n"
            "session file format (JSONL)."
        ),
        formatter_class=_Formatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True
    handler = "nexus.cli._sessions:sessions_command"

    listing = actions.add_parser("list", help="list sessions, most recently updated first")
    listing.add_argument("--all", action="store_true", help="include archived sessions")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=handler)

    show = actions.add_parser("show", help="show one session: head turn, counts, tokens, aliases")
    show.add_argument("label", metavar="LABEL", type=_label, help="session label or alias")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(handler=handler)

    history = actions.add_parser("history", help="print a session's turns and messages, with turn ids")
    history.add_argument("label", metavar="LABEL", type=_label, help="session label or alias")
    history.add_argument("--json", action="store_true", help="print one JSON object per message (as stored)")
    history.add_argument(
        "--raw",
        action="store_true",
        help="print messages exactly as stored and sent to the model (event-context header, full tool results)",
    )
    history.set_defaults(handler=handler)

    fork = actions.add_parser("fork", help="start a new session at an existing turn")
    fork.add_argument("turn_id", metavar="TURN_ID", type=_label, help="the turn the new session continues from")
    fork.add_argument("--label", metavar="L", type=_label, help="label of the new session (default: <session>-fork-N)")
    fork.set_defaults(handler=handler)

    export = actions.add_parser("export", help="write a session as a pi-coding-agent session file")
    export.add_argument("label", metavar="LABEL", type=_label, help="session label or alias")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(handler=handler)

    imported = actions.add_parser("import", help="import a pi-coding-agent session file as a new session")
    imported.add_argument("file", metavar="FILE", help="the .jsonl session file")
    imported.add_argument("--label", metavar="L", type=_label, help="label of the new session (default: from the file)")
    imported.set_defaults(handler=handler)

    compact = actions.add_parser(
        "compact",
        help="summarise the older part of a session now, so its next run starts from the summary",
        description=(
            "Summarise the older part of a session with the model and record a compaction turn,\n"
            "as the agent does by itself when the context fills up. The most recent part of the\n"
            "conversation is kept verbatim; nothing is changed if the summary would not make the\n"
            "context smaller. Waits while a run of the session is in progress."
        ),
        epilog='examples:\n  nexus sessions compact main\n  nexus sessions compact bugfix --focus "the failing test"\n',
        formatter_class=_Formatter,
    )
    compact.add_argument("label", metavar="LABEL", type=_label, help="session label or alias")
    compact.add_argument("--focus", metavar="TEXT", help="what the summary should keep in particular")
    compact.add_argument(
        "-m",
        "--model",
        metavar="PROVIDER/MODEL",
        help="model that writes the summary (default: the model a run would use)",
    )
    compact.set_defaults(handler=handler)


def _add_doctor(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "doctor",
        help="check the configuration, keys, database, workspace and local model",
        description=(
            "Check everything nexus needs and say what to fix: the config file, which API keys\n"
            "are set (never their values), the model that would be used and why, the database,\n"
            "the workspace and the offline model. Exit code 0 when all is well, 1 when something\n"
            "needs attention, 2 when the config file is invalid."
        ),
        formatter_class=_Formatter,
    )
    sub.set_defaults(handler="nexus.cli._doctor:doctor_command")


def _add_models(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "models",
        help="list the models nexus knows (context window, prices)",
        description=(
            "List the model catalog: context window, output limit and $ per million tokens.\n"
            "Models not listed still work by name (provider/model) with default limits."
        ),
        formatter_class=_Formatter,
    )
    sub.add_argument("-p", "--provider", metavar="NAME", help="only this provider's models")
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.set_defaults(handler="nexus.cli._models:models_command")
