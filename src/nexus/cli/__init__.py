"""The ``nexus`` command: run agents, chat, inspect sessions, check the setup.

Start-up cost matters here (``nexus --help`` must feel instant), so this module imports
only ``argparse``; every command imports what it needs when it runs.

Exit codes: 0 success, 1 a Nexus error (clean message, no traceback), 2 bad
arguments or an invalid configuration, 130 interrupted, 141 stdout closed by its reader
(``nexus … | head``: 128 + SIGPIPE, as a shell reports a filter stopped by the pipe).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from nexus.cli._parser import build_parser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help/--version (0) or bad arguments (2)
        return exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 2
    from nexus.errors import ConfigError, NexusError

    try:
        handler = _load_handler(str(args.handler))
        return int(handler(args) or 0)
    except ConfigError as exc:
        print(f"nexus: config error: {_cli_message(exc)}", file=sys.stderr)
        return 2
    except NexusError as exc:
        print(f"nexus: error: {_cli_message(exc)}", file=sys.stderr)
        return 2 if _is_setup_error(exc) else 1
    except KeyboardInterrupt:
        print("nexus: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early: stop quietly, like a Unix filter
        from nexus.cli._render import silence_stdout

        silence_stdout()
        return 141


def _load_handler(spec: str) -> Callable[[argparse.Namespace], int | None]:
    from nexus.errors import NexusError

    module_name, _, function = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        command = module_name.rsplit(".", 1)[-1].removesuffix("_cmd")
        raise NexusError(f"the '{command}' command is not available in this build of nexus") from None
    handler: Callable[[argparse.Namespace], int | None] = getattr(module, function)
    return handler


def _is_setup_error(exc: BaseException) -> bool:
    """A ledger this Nexus cannot use at all (a schema it does not know, a server it cannot reach): exit 2."""
    from nexus.ledger.errors import LedgerUnavailableError, SchemaVersionError

    return isinstance(exc, SchemaVersionError | LedgerUnavailableError)


def _cli_message(exc: BaseException) -> str:
    from nexus.cli._errors import cli_message

    return cli_message(exc)
