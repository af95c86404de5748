"""``nexus run``'s usual command lines, read without argparse.

Importing argparse, building the ``run`` parser and parsing (with gettext looking up translations for
every message the parser might print) was the CLI's largest own part of a one-shot ``nexus run`` after
the libraries it cannot do without. Most lines are plain: ``nexus run [-s LABEL] [-m MODEL] [--thinking
LEVEL] [--json] MESSAGE``. :func:`read_run_line` reads exactly those, into the values argparse would
give; any other line (``--help``, ``--session=x``, an abbreviation, an option twice, a value or message
starting with ``-``, a bad value, a missing message) is left to argparse, which parses it or says what is
wrong as it always did. ``tests/cli/test_cli_parser.py`` holds the two side by side.
"""

from __future__ import annotations

from types import SimpleNamespace

from nexus.cli._input import valid_utf8

RUN_HANDLER = "nexus.cli.run_cmd:run_command"
"""The handler the ``run`` parser sets (``nexus.cli._parser``)."""

_VALUED = {"-s": "session", "--session": "session", "-m": "model", "--model": "model", "--thinking": "thinking"}
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high")
"""``--thinking``'s choices."""


def read_run_line(argv: list[str]) -> SimpleNamespace | None:
    """The parsed ``nexus run`` line (argparse's names and values), or ``None``: argparse must read it."""
    if not argv or argv[0] != "run":
        return None
    values: dict[str, object] = {"session": "main", "model": None, "thinking": None, "json": False}
    seen: set[str] = set()
    message = None
    args = iter(argv[1:])
    for arg in args:
        name = _VALUED.get(arg)
        if name is not None:
            value = next(args, None)
            if name in seen or value is None or value.startswith("-") or not valid_utf8(value):
                return None
            values[name] = value
        elif arg == "--json":
            name = "json"
            if name in seen:
                return None
            values[name] = True
        elif (arg.startswith("-") and arg != "-") or message is not None:
            return None
        else:
            message = arg
        if name is not None:
            seen.add(name)
    if message is None or values["thinking"] not in (None, *THINKING_LEVELS):
        return None
    return SimpleNamespace(config=None, command="run", **values, message=message, handler=RUN_HANDLER)
