"""``nexus run``: one message to a session's agent, the reply streamed, the turn in the ledger.

The run itself is the CLI's :class:`~nexus.cli._conversation.Conversation` (shared with
``nexus chat``): the engine's ``Runtime.start``, rendered as it streams.

Exit codes: 0 the turn completed; 1 it failed or was aborted (the message is on stderr and
the turn is in the ledger with status ``failed``/``aborted``); 2 bad arguments or config;
130 interrupted with Ctrl-C (the run is aborted first, so its partial reply is recorded);
141 stdout was closed by its reader (``nexus run … | head``): the run is aborted quietly,
its partial reply recorded, like a Unix filter stopped by SIGPIPE (128 + 13).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from nexus.cli._conversation import TurnExit, open_conversation
from nexus.cli._render import JsonRenderer, Renderer, RunSummary, TextRenderer
from nexus.errors import ConfigError, NexusError, UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["exit_code", "iterations_notice", "read_message", "run_command", "stop_notice"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_OUTPUT_CLOSED = 141
"""stdout's reader went away: 128 + SIGPIPE, what a shell reports for a filter killed by it."""


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``nexus run`` (called by ``nexus.cli.main``); returns the exit code."""
    renderer: Renderer = JsonRenderer() if args.json else TextRenderer(show_reasoning=_wants_reasoning(args))
    try:
        message = read_message(args.message)
        with open_conversation(args) as conversation:
            outcome = conversation.run_turn_sync(message, renderer)
    except NexusError as exc:
        if args.json:  # a JSON consumer gets the failure in-band too
            from nexus.cli._errors import cli_message

            renderer.error(cli_message(exc), "config" if isinstance(exc, ConfigError) else "error")
        raise
    if not args.json and not outcome.output_closed:
        if outcome.summary is None:
            print("nexus: interrupted", file=sys.stderr)
        elif outcome.summary.status != "completed":
            print(f"nexus: {_failure_line(outcome.summary)}", file=sys.stderr)
        elif (notice := stop_notice(outcome.summary)) is not None:
            print(f"nexus: {notice}", file=sys.stderr)
    return exit_code(outcome)


def stop_notice(summary: RunSummary) -> str | None:
    """The stderr line for a completed run that stopped short (tool-call or output limit), else None.

    Text mode shows only the reply, so without this line a cut-off reply looks like a finished one.
    """
    if summary.status != "completed":
        return None
    if summary.stop_reason == "tool_use":
        return iterations_notice(summary)
    if summary.stop_reason == "max_tokens":
        return output_limit_notice(summary.model)
    return None


def output_limit_notice(model_ref: str) -> str:
    """What to say when the reply of ``provider/model`` was cut at its output-token limit.

    It names the exact table to write, which works for every provider, the local one included.
    """
    from nexus.config import dotted

    provider, _, model_id = model_ref.partition("/")
    table = dotted(("providers", provider, "models", model_id))
    return (
        "stopped: the reply reached the output limit (max_tokens). Send another message asking it to continue, "
        f"or raise it in nexus.toml: [{table}] max_tokens = …"
    )


def iterations_notice(summary: RunSummary) -> str:
    """What to say when a run stopped at ``max_iterations`` with the model still calling tools."""
    return (
        f"stopped after {summary.tool_calls} tool call(s): the run reached agent.max_iterations with the model "
        "still calling tools. Send another message to let it continue, or raise max_iterations in the [agent] "
        "table of nexus.toml"
    )


def _wants_reasoning(args: argparse.Namespace) -> bool:
    return getattr(args, "thinking", None) not in (None, "off")


def read_message(raw: str, stdin: Any = None, limit: int | None = None, command: str = "nexus run") -> str:
    """The message argument, or all of stdin for ``-``; an empty message is a usage error (exit 2).

    Bytes that are not UTF-8 are replaced by U+FFFD, with a note on stderr (see ``nexus.cli._input``).
    ``limit``: the most characters a message may have (checked before anything else is said about it).
    ``command``: what the errors' examples show (``nexus send AGENT``: send's empty message quoted ``nexus run``).
    """
    from nexus.cli._input import accept_text, read_all

    if raw == "-":
        source = sys.stdin if stdin is None else stdin
        if source is None or (hasattr(source, "isatty") and source.isatty()):
            raise UsageError(f"MESSAGE is '-' but stdin is a terminal: pipe the message in, e.g. echo hi | {command} -")
        raw = read_all(source, limit)
    elif limit is not None and len(raw) > limit:
        raise UsageError(f"the message is {len(raw):,} characters; the limit is {limit:,}")
    else:
        raw = accept_text(raw, "given on the command line")
    text = raw.strip()
    if not text:
        raise UsageError(f'the message is empty: give the text to send, e.g. {command} "hello"')
    return text


def _failure_line(summary: RunSummary) -> str:
    from nexus.cli._errors import cli_text

    if summary.status == "aborted":
        return f"run aborted: {summary.error or 'stopped before it finished'} (partial reply kept in the ledger)"
    kind = f" ({summary.error_kind})" if summary.error_kind else ""
    return f"run failed{kind}: {cli_text(summary.error or 'unknown error')}"


def exit_code(outcome: TurnExit) -> int:
    """0 completed, 1 failed/aborted, 130 Ctrl-C, 141 stdout closed, 143 SIGTERM."""
    if outcome.output_closed:
        return EXIT_OUTPUT_CLOSED
    if outcome.terminated:
        return EXIT_TERMINATED
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    if outcome.summary is None or outcome.summary.status != "completed":
        return EXIT_FAILED
    return EXIT_OK
