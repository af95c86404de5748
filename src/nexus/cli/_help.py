"""What ``nexus --help`` says, and that help printed without argparse when no line has to wrap.

Importing argparse costs more than the rest of ``nexus --help`` together (it pulls ``re`` and
``enum``: 10 ms of a 30 ms budget on a small VM). The top-level help is fixed text in a fixed
layout, so :func:`top_help` lays it out as argparse's formatter does (``_parser.build_parser``
builds the parser from the same texts) when every line fits the terminal, and answers ``None``
otherwise (a narrow terminal): then the CLI asks argparse, which wraps. The help lines are
kept short enough to fit 80 columns. ``tests/cli/test_cli_parser.py`` compares both outputs at
every width from 20 to 250 columns.
"""

from __future__ import annotations

import os
import sys

COMMANDS: dict[str, str] = {
    "run": "send one message to an agent and print its reply",
    "chat": "interactive conversation in the terminal",
    "sessions": "list, inspect, fork, compact, export and import sessions",
    "doctor": "check config, keys, database, workspace and local model",
    "models": "list the models nexus knows (context window, prices)",
    "send": "send a message to a named agent through its durable queue",
    "agents": "add, list, show and remove named agents (managers, workers)",
    "queue": "inspect and clear the agents' durable message queues",
    "adapters": "register, enable, check and try chat-platform adapters",
    "serve": "run the broker and the HTTP API (agents, sessions, OpenAI)",
    "mcp": "add, list, remove, try MCP servers; serve agents over MCP",
    "db": "migrate, check or copy the ledger (SQLite, PostgreSQL)",
    "route": "find the past work a task continues; routing A/B stats",
}
"""Every command, in the order ``nexus --help`` lists them, with its one-line help."""

DESCRIPTION = "Nexus broker: run LLM agents with a persistent ledger of every turn."
CONFIG_HELP = "use FILE instead of $NEXUS_CONFIG or $NEXUS_HOME/nexus.toml"
EPILOG = """\
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
MAX_HELP_POSITION = 32
"""Column where argparse starts the help of an option at most (``_parser._Formatter``)."""

_USAGE = "usage: nexus [-h] [--version] [--config FILE] COMMAND ..."
_OPTIONS = (
    ("-h, --help", "show this help message and exit"),
    ("--version", "show program's version number and exit"),
    ("--config FILE", CONFIG_HELP),
)


def terminal_width() -> int:
    """The width argparse formats help for: the terminal's columns (as ``shutil.get_terminal_size``
    finds them: ``$COLUMNS``, then the terminal of stdout, else 80) minus 2."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns - 2


def top_help(width: int) -> str | None:
    """``nexus --help`` laid out for ``width`` columns as argparse would, or None when a line would wrap."""
    rows = [(2, name, text) for name, text in _OPTIONS] + [(4, name, text) for name, text in COMMANDS.items()]
    longest = max(max(len(name) for _, name, _ in rows), len("COMMAND")) + 2
    position = min(longest + 2, min(MAX_HELP_POSITION, max(width - 20, 4)))
    if len(_USAGE) > width or any(len(text) > max(width - position, 11) for _, _, text in rows):
        return None
    if any(indent + len(name) > position - 2 for indent, name, _ in rows):
        return None
    lines = [_USAGE, "", DESCRIPTION, "", "options:"]
    lines += [f"  {name:<{position - 4}}  {text}" for _, name, text in rows[: len(_OPTIONS)]]
    lines += ["", "commands:", "  COMMAND"]
    lines += [f"    {name:<{position - 6}}  {text}" for _, name, text in rows[len(_OPTIONS) :]]
    return "\n".join([*lines, "", EPILOG])
