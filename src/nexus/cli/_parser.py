"""The argument parser of ``nexus``: every command, option and help text, and nothing else.

Handlers are named as ``"module:function"`` strings and imported only when their command
runs. Only the commands named on the command line get their options (see :func:`build_parser`).
The top-level texts live in ``nexus.cli._help``, which prints ``nexus --help`` without argparse.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from nexus import __version__
from nexus.cli._help import COMMANDS, CONFIG_HELP, DESCRIPTION, EPILOG, MAX_HELP_POSITION, terminal_width
from nexus.cli._input import new_label
from nexus.cli._input import utf8_name as _label
from nexus.cli._run_line import RUN_HANDLER, THINKING_LEVELS

TYPE_CHECKING = False  # not typing's: `nexus --help` does not import typing (mypy reads the name the same way)
if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

_THINKING = THINKING_LEVELS


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped descriptions and examples as written (width found without importing shutil)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=MAX_HELP_POSITION, width=terminal_width())


TOP_OPTIONS = ("-h", "--help", "--version", "--config")


def unknown_top_option(argv: Sequence[str]) -> str | None:
    """An option given before any command that ``nexus`` itself does not have (``None``: none).

    argparse checks that a COMMAND was given before it looks at unknown options, so ``nexus --bogus``
    said "the following arguments are required: COMMAND", about what was not wrong."""
    args = iter(argv)
    for arg in args:
        if arg in COMMANDS or not arg.startswith("-") or arg == "-":
            return None  # a command (its parser judges the rest), or a word argparse names itself
        if arg == "--config":
            next(args, None)
        elif arg.split("=", 1)[0] not in TOP_OPTIONS:
            return arg
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``nexus`` parser (subcommands set ``handler`` to a lazily imported function).

    With ``argv`` naming a command (``nexus run …``), the parser holds that command alone, complete:
    argparse hands the rest of the line to it and never looks at the others (each one is an
    ``ArgumentParser`` of its own: 12 of them were half of building the parser for ``nexus run``).
    With ``argv`` naming none (``nexus --help``, ``nexus bogus``), every command is listed with
    its help line, which is all the help and the "invalid choice" error need, and those whose names
    appear in ``argv`` get their options. Without ``argv`` every command is complete.
    """
    parser = argparse.ArgumentParser(
        prog="nexus",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"nexus {__version__}")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=CONFIG_HELP,
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    commands.required = True
    command = None if argv is None else command_word(argv)
    if command is not None:
        _builder(command)(commands, COMMANDS[command])
        return parser
    named = set(COMMANDS) if argv is None else set(COMMANDS).intersection(argv)
    for name, summary in COMMANDS.items():
        if name in named:
            _builder(name)(commands, summary)
        else:
            commands.add_parser(name, help=summary)
    return parser


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, where argparse finds it: the first word after the top-level options
    (``--config FILE`` included), if it is one of :data:`COMMANDS` (``None``: no command, or not a known one)."""
    args = iter(argv)
    for arg in args:
        if arg == "--config":
            next(args, None)
        elif not arg.startswith("-") or arg == "-":
            return arg if arg in COMMANDS else None
        elif arg == "--":
            return None
    return None


def _builder(name: str) -> Callable[[Commands, str], None]:
    """The function that adds command ``name`` with all its options."""
    here = {"run": _add_run, "chat": _add_chat, "sessions": _add_sessions, "doctor": _add_doctor, "models": _add_models}
    if name in here:
        return here[name]
    if name == "adapters":
        from nexus.cli._adapters_parser import add_adapters

        return lambda commands, summary: add_adapters(commands, summary, _Formatter)
    if name == "db":
        from nexus.cli._db_parser import add_db

        return add_db
    if name == "route":
        from nexus.cli._route_parser import add_route

        return add_route
    if name == "mcp":
        from nexus.cli._mcp_parser import add_mcp

        return lambda commands, summary: add_mcp(commands, summary, _Formatter)
    from nexus.cli import _broker_parser

    builder: Callable[[Commands, str], None] = getattr(_broker_parser, f"add_{name}")
    return builder


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


def _add_run(commands: Commands, summary: str) -> None:
    sub = commands.add_parser(
        "run",
        help=summary,
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
    sub.set_defaults(handler=RUN_HANDLER)


def _add_chat(commands: Commands, summary: str) -> None:
    sub = commands.add_parser(
        "chat",
        help=summary,
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


def _add_sessions(commands: Commands, summary: str) -> None:
    sub = commands.add_parser(
        "sessions",
        help=summary,
        description=(
            "Sessions are named pointers into the ledger's tree of turns. Forking creates a new\n"
            "session at any earlier turn (nothing is copied); export/import use the pi-coding-agent\n"
            "session file format (JSONL).\n\n"
            "An archived session (DELETE /v1/sessions/LABEL, the web UI's delete) is hidden from\n"
            "`list` (`list --all` shows it) and keeps every turn; new activity in it (nexus run -s\n"
            "LABEL, nexus send, a message over HTTP) restores it to the lists."
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

    export = actions.add_parser("export", help="write a session as a pi-coding-agent session file")
    export.add_argument("label", metavar="LABEL", type=_label, help="session label or alias")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(handler=handler)

    _add_fork_and_import(actions, handler)
    _add_compact(actions, handler)


def _add_fork_and_import(actions: Commands, handler: str) -> None:
    """``nexus sessions fork`` and ``import``: the two actions that make a session, and the labels they give it."""
    fork = actions.add_parser(
        "fork",
        help="start a new session at an existing turn",
        description=(
            "Start a new session whose history ends at TURN_ID (any finished turn, of any session;\n"
            "nothing is copied). Without --label it is named after the turn's session and a counter,\n"
            "the first one free: main-fork-1, main-fork-2, … (the HTTP API and chat's /fork name\n"
            "forks the same way). A --label already taken is exit 2."
        ),
        formatter_class=_Formatter,
    )
    fork.add_argument("turn_id", metavar="TURN_ID", type=_label, help="the turn the new session continues from")
    fork.add_argument(
        "--label", metavar="L", type=new_label, help="label of the new session (default: <session>-fork-N)"
    )
    fork.set_defaults(handler=handler)

    imported = actions.add_parser(
        "import",
        help="import a pi-coding-agent session file as a new session",
        description=(
            "Import a pi-coding-agent session file (JSONL) as a new session and print its label.\n\n"
            "The label, without --label: `pi-` and the session id the file's header holds (its\n"
            'first line, `"id"`), not the file\'s name: each character other than a letter, digit,\n'
            "`.`, `_` or `-` becomes `-` (runs of them one), `-` and `.` are trimmed from both ends,\n"
            "and at most 13 characters are kept; an id that keeps none gets a random one. The\n"
            "file's other branches become sessions LABEL-fork-1, LABEL-fork-2, …\n"
            "A label already taken (the same file imported twice) is exit 2: give --label NAME."
        ),
        epilog=(
            "examples:\n"
            '  nexus sessions import ../../x.jsonl          # header id "0b2f6e2a-1c4d-…" → pi-0b2f6e2a-1c4d\n'
            "  nexus sessions import x.jsonl --label retry  # the session is named retry\n"
        ),
        formatter_class=_Formatter,
    )
    imported.add_argument("file", metavar="FILE", help="the .jsonl session file")
    imported.add_argument(
        "--label", metavar="L", type=new_label, help="label of the new session (default: pi- and the file's session id)"
    )
    imported.set_defaults(handler=handler)


def _add_compact(actions: Commands, handler: str) -> None:
    """``nexus sessions compact``: the summary a run makes when its context fills up, made now."""
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


def _add_doctor(commands: Commands, summary: str) -> None:
    sub = commands.add_parser(
        "doctor",
        help=summary,
        description=(
            "Check everything nexus needs and say what to fix: the config file, which API keys\n"
            "are set (never their values), the model that would be used and why, the database,\n"
            "the workspace and the offline model. Exit code 0 when all is well, 1 when something\n"
            "needs attention, 2 when the config file is invalid."
        ),
        formatter_class=_Formatter,
    )
    sub.set_defaults(handler="nexus.cli._doctor:doctor_command")


def _add_models(commands: Commands, summary: str) -> None:
    sub = commands.add_parser(
        "models",
        help=summary,
        description=(
            "List the model catalog: context window, output limit and $ per million tokens.\n"
            "Models not listed still work by name (provider/model) with default limits."
        ),
        formatter_class=_Formatter,
    )
    sub.add_argument("-p", "--provider", metavar="NAME", help="only this provider's models")
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.set_defaults(handler="nexus.cli._models:models_command")
