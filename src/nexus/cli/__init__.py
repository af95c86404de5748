"""The ``nexus`` command: run agents, chat, inspect sessions, check the setup.

Start-up cost matters here (``nexus --help`` must feel instant), so this module imports
nothing heavy; every command imports what it needs when it runs, the parser is built only as
far as the command line needs it (``nexus.cli._parser``), and a plain ``nexus run`` line is
read without argparse (``nexus.cli._run_line``).

Exit codes: 0 success, 1 a Nexus error (clean message, no traceback), 2 bad
arguments or an invalid configuration, 130 interrupted, 141 stdout closed by its reader
(``nexus … | head``: 128 + SIGPIPE, as a shell reports a filter stopped by the pipe).
"""

from __future__ import annotations

import gc
import sys

TYPE_CHECKING = False  # not typing's: `nexus --help` does not import typing (mypy reads the name the same way)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

__all__ = ["main"]


ONE_SHOT_COMMANDS = frozenset({"run", "doctor", "models", "sessions"})
"""Commands that do one bounded piece of work and exit; their process runs without the cyclic collector."""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return the exit code.

    Without ``argv`` this is the ``nexus`` process itself. It declares the optional modules it
    never uses (:func:`skip_unused_optional_modules`) and pauses the cyclic garbage collector:
    starting a command makes tens of thousands of objects (modules, classes, functions, the config)
    that live until the process ends, and the collector walked them over and over as they were
    made, then once more at exit: 10% of a ``nexus run``. A command that runs for long (chat,
    serve, send, the monitors) gets the collector back once it is loaded; a one-shot command
    (:data:`ONE_SHOT_COMMANDS`: one turn, one listing) leaves its few thousand cyclic objects to the
    exit. What is left when the command returns is frozen, so the exit does not walk it either:
    everything that needs closing (ledger, event loop, HTTP client) was closed by the command.
    """
    if argv is not None:
        return _main(argv, process=False)
    skip_unused_optional_modules()
    gc.disable()
    try:
        return _main(sys.argv[1:], process=True)
    finally:
        gc.freeze()


def _main(argv: Sequence[str], *, process: bool) -> int:
    if list(argv) in (["--help"], ["-h"]) and _print_top_help():
        return 0
    args = _read_run_line(argv)  # `nexus run` as usually typed, without argparse (None: argparse reads it)
    if args is None:
        from nexus.cli._parser import build_parser, unknown_top_option

        unknown = unknown_top_option(argv)
        if unknown is not None:
            print(f"nexus: error: unknown option {unknown!r}; before a COMMAND nexus takes --config FILE, --version"
                  " and --help (`nexus --help` lists the commands)", file=sys.stderr)  # fmt: skip
            return 2
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # argparse: --help/--version (0) or bad arguments (2)
            return exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 2
    from nexus.cli._sigterm import Terminated
    from nexus.errors import ConfigError, NexusError, UsageError

    if process:
        _prefix_library_warnings()
    try:
        handler = _load_handler(str(args.handler))
        if process and args.command not in ONE_SHOT_COMMANDS:
            gc.enable()
        code = int(handler(args) or 0)
        if process:
            sys.stdout.flush()  # here, not at the interpreter's exit: a full disk under `> file` is one error line
        return code
    except ConfigError as exc:  # a wrong argument is no "config error": a stranger took it for one in nexus.toml
        kind = "error" if isinstance(exc, UsageError) else "config error"
        print(f"nexus: {kind}: {_cli_message(exc)}", file=sys.stderr)
        return 2
    except NexusError as exc:
        print(f"nexus: error: {_cli_message(exc)}", file=sys.stderr)
        return 2 if _is_setup_error(exc) else 1
    except KeyboardInterrupt:
        print("nexus: interrupted", file=sys.stderr)
        return 130
    except Terminated:  # SIGTERM to a command that ran the broker here: its runs were aborted and written
        print("nexus: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:  # output piped into `head` and closed early: stop quietly, like a Unix filter
        from nexus.cli._closed_output import silence_stdout

        silence_stdout()
        return 141
    except OSError as exc:  # `nexus sessions export L > file` on a full disk printed a traceback (a stranger's trial)
        import errno

        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise
        from nexus.cli._closed_output import silence_stdout

        silence_stdout()  # what is still buffered would fail again at exit
        where = exc.filename or "the output (stdout)"
        print(f"nexus: error: cannot write {where}: {exc.strerror or exc} (is the disk full?)", file=sys.stderr)
        return 1


def _read_run_line(argv: Sequence[str]) -> argparse.Namespace | None:
    if not argv or argv[0] != "run":
        return None
    from nexus.cli._run_line import read_run_line

    return read_run_line(list(argv))  # type: ignore[return-value]  # argparse's names on a SimpleNamespace


def _prefix_library_warnings() -> None:
    """Give the library's warnings the ``nexus:`` prefix of every other line the CLI writes to stderr.

    Nothing sets up logging in a CLI command (unless telemetry's log lines are on: they install their own
    handler), so a library warning (a crash journal that a full disk refused) reached the terminal through
    logging's last-resort handler as a bare message, where docs/cli.md quotes ``nexus: could not write the
    crash journal …``. Only the last resort changes: a handler anyone installs still gets every record.
    """
    import logging

    class LastResort(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:  # stderr looked up at each line, as the standard last resort does
                sys.stderr.write(f"nexus: {self.format(record)}\n")
            except Exception:  # stderr closed or gone: the standard handler's own rule
                self.handleError(record)

    logging.lastResort = LastResort(logging.WARNING)


UNUSED_OPTIONAL_MODULES = ("trio", "httpx._main")
"""Modules that libraries nexus uses import when they happen to be installed, and that the ``nexus``
process never needs: httpcore probes for ``trio`` at import (nexus runs on asyncio; trio and its
dependencies cost 40-80 ms), and ``import httpx`` loads httpx's own command-line tool (click, rich,
pygments: 50-70 ms) whenever those are installed."""


def skip_unused_optional_modules() -> None:
    """Mark :data:`UNUSED_OPTIONAL_MODULES` as absent for this process, unless already imported.

    Each library imports them in a ``try``/``except ImportError``, so it carries on without them;
    only the CLI process does this (an application embedding nexus keeps its modules).
    """
    for name in UNUSED_OPTIONAL_MODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: "not importable", by the import system


def _print_top_help() -> bool:
    """Print ``nexus --help`` without argparse (False when it needs argparse's wrapping: a narrow terminal)."""
    from nexus.cli._help import terminal_width, top_help

    text = top_help(terminal_width())
    if text is None:
        return False
    try:
        sys.stdout.write(text)
    except OSError:  # as argparse: a closed stdout is no error of --help
        pass
    return True


def _load_handler(spec: str) -> Callable[[argparse.Namespace], int | None]:
    import importlib

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
    """Exit 2, as for a bad argument: a ledger this Nexus cannot use at all (a schema it does not know, a server
    it cannot reach), or a session, alias or turn named on the command line that the ledger does not hold (as an
    unknown agent: one rule for every name that names nothing, so a script can tell a typo from a failed run)."""
    from nexus.ledger import LedgerUnavailableError, SchemaVersionError, SessionNotFound, TurnNotFound

    return isinstance(exc, SchemaVersionError | LedgerUnavailableError | SessionNotFound | TurnNotFound)


def _cli_message(exc: BaseException) -> str:
    from nexus.cli._errors import cli_message

    return cli_message(exc)
