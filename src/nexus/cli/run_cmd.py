"""``nexus run``: one message to a session's agent, the reply streamed, the turn in the ledger.

The pieces here are shared with ``nexus chat``: :func:`open_runtime` loads the config,
picks the model, opens the ledger and closes turns a crashed process left open;
:class:`Runtime` runs one turn through the engine and renders it as it streams.

Exit codes: 0 the turn completed; 1 it failed or was aborted (the message is on stderr and
the turn is in the ledger with status ``failed``/``aborted``); 2 bad arguments or config;
130 interrupted with Ctrl-C (the run is aborted first, so its partial reply is recorded);
141 stdout was closed by its reader (``nexus run … | head``): the run is aborted quietly,
its partial reply recorded, like a Unix filter stopped by SIGPIPE (128 + 13).
"""

from __future__ import annotations

import argparse
import asyncio
import signal as signal_module
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from nexus.cli._engine_bridge import call_engine, summarize_run
from nexus.cli._render import (
    ClosedOutputGuard,
    JsonRenderer,
    Renderer,
    RunSummary,
    TextRenderer,
)
from nexus.errors import ConfigError, NexusError
from nexus.ledger.records import DEFAULT_SESSION

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.engine.types import EngineEvent
    from nexus.engine.wiring.compact_session import SessionCompaction
    from nexus.engine.wiring.runner import EngineEnv
    from nexus.ledger import Ledger
    from nexus.llm.abort import AbortSignal
    from nexus.llm.types import Model

__all__ = [
    "DEFAULT_SESSION",
    "Runtime",
    "exit_code",
    "iterations_notice",
    "open_runtime",
    "read_message",
    "run_command",
    "stop_notice",
]


T = TypeVar("T")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_OUTPUT_CLOSED = 141
"""stdout's reader went away: 128 + SIGPIPE, what a shell reports for a filter killed by it."""


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``nexus run`` (called by ``nexus.cli.main``); returns the exit code."""
    renderer: Renderer = JsonRenderer() if args.json else TextRenderer(show_reasoning=_wants_reasoning(args))
    try:
        message = read_message(args.message)
        with open_runtime(args) as runtime:
            outcome = runtime.run_turn_sync(message, renderer)
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
    from nexus.config._load import dotted

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


def read_message(raw: str, stdin: Any = None, limit: int | None = None) -> str:
    """The message argument, or all of stdin for ``-``; an empty message is a usage error (exit 2).

    Bytes that are not UTF-8 are replaced by U+FFFD, with a note on stderr (see ``nexus.cli._input``).
    ``limit``: the most characters a message may have (checked before anything else is said about it).
    """
    from nexus.cli._input import accept_text, read_all

    if raw == "-":
        source = sys.stdin if stdin is None else stdin
        if source is None or (hasattr(source, "isatty") and source.isatty()):
            raise ConfigError("MESSAGE is '-' but stdin is a terminal: pipe the message in, e.g. echo hi | nexus run -")
        raw = read_all(source, limit)
    elif limit is not None and len(raw) > limit:
        raise ConfigError(f"the message is {len(raw):,} characters; the limit is {limit:,}")
    else:
        raw = accept_text(raw, "given on the command line")
    text = raw.strip()
    if not text:
        raise ConfigError('the message is empty: give the text to send, e.g. nexus run "hello"')
    return text


def _failure_line(summary: RunSummary) -> str:
    from nexus.cli._errors import cli_text

    if summary.status == "aborted":
        return f"run aborted: {summary.error or 'stopped before it finished'} (partial reply kept in the ledger)"
    kind = f" ({summary.error_kind})" if summary.error_kind else ""
    return f"run failed{kind}: {cli_text(summary.error or 'unknown error')}"


# --------------------------------------------------------------------------- runtime


@dataclass(slots=True)
class TurnOutcome:
    """What happened to one turn: its summary (None if it never finished) and whether Ctrl-C stopped it."""

    summary: RunSummary | None
    interrupted: bool = False
    terminated: bool = False
    output_closed: bool = False


def exit_code(outcome: TurnOutcome) -> int:
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


@dataclass(slots=True)
class Runtime:
    """Config, ledger, session label, model and thinking level of a CLI run (chat changes them between turns)."""

    config: NexusConfig
    ledger: Ledger
    session: str
    model: str
    thinking: str | None = None
    unsaved: list[str] = field(default_factory=list)
    """Turns of this process whose final write failed (kept in rescue files): the next turn of their
    session puts them in the ledger before it reads the head, so a chat that goes on does not fork."""
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _env: EngineEnv | None = field(default=None, repr=False)
    _thinking_noted: set[str] = field(default_factory=set, repr=False)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client, the event loop and the ledger."""
        if self._loop is not None and not self._loop.is_closed():
            from nexus.llm._http import aclose_client

            try:
                if self._env is not None and self._env.mcp is not None:
                    self._loop.run_until_complete(self._env.mcp.close())  # the MCP servers this process started
                self._loop.run_until_complete(aclose_client())
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                # join worker threads (the local model's generation) while the loop can still take their results
                self._loop.run_until_complete(self._loop.shutdown_default_executor())
            finally:
                self._loop.close()
        self.ledger.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """One event loop for the whole process (the HTTP client and its connections live on it)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def session_exists(self, label: str | None = None) -> bool:
        """Whether the session (label or alias) already exists in the ledger."""
        from nexus.ledger import SessionNotFound

        try:
            self.ledger.resolve_session(label or self.session)
        except SessionNotFound:
            return False
        return True

    def run_turn_sync(self, message: str, renderer: Renderer) -> TurnOutcome:
        """Run one turn on the process's loop; Ctrl-C aborts it (a second Ctrl-C stops waiting).

        A closed stdout (the reader of a pipe went away) aborts the run too, quietly.
        """
        guards: list[ClosedOutputGuard] = []

        def start(abort: AbortSignal) -> Coroutine[Any, Any, RunSummary]:
            guard = ClosedOutputGuard(renderer, lambda: abort.abort("stdout was closed by its reader"))
            guards.append(guard)
            return self.run_turn(message, guard, abort)

        summary, interrupted, terminated = run_with_signals(self.loop, start)
        return TurnOutcome(summary, interrupted, terminated, output_closed=any(g.closed for g in guards))

    async def run_turn(self, message: str, renderer: Renderer, abort: AbortSignal) -> RunSummary:
        """Run one turn through the engine, streaming into ``renderer``; the engine writes the ledger."""
        started = time.monotonic()
        result, ctx, turn_id, created = await call_engine(self, message, renderer, abort)
        summary = summarize_run(self, result, ctx, turn_id, created, started)
        if summary.status != "completed":
            from nexus.cli._errors import cli_text

            renderer.error(cli_text(summary.error or summary.status), summary.error_kind)
        renderer.finish(summary)
        return summary

    def note_thinking(self, model: Model) -> None:
        """Say once per model (on stderr) that a thinking level it cannot use is ignored."""
        level = self.thinking if self.thinking is not None else self.config.thinking
        if level == "off" or model.reasoning or model.ref in self._thinking_noted:
            return
        self._thinking_noted.add(model.ref)
        print(
            f"nexus: {model.ref} does not support reasoning; thinking level {level!r} is ignored",
            file=sys.stderr,
            flush=True,
        )

    def engine_env(self) -> EngineEnv:
        """The engine environment shared by this process's turns (model cache, auth cooldowns)."""
        if self._env is None:
            from nexus.engine.wiring.runner import EngineEnv

            self._env = EngineEnv.from_config(self.config, self.ledger)
        return self._env


def open_runtime(args: argparse.Namespace) -> Runtime:
    """Load config, resolve the model (ConfigError → exit 2), open the ledger and recover crashed turns."""
    from nexus.cli._state import prepare_state
    from nexus.config import load_config, resolve_default_model
    from nexus.ledger import Ledger

    config = load_config(getattr(args, "config", None))
    if config.telemetry.tracing:  # off (the default): nothing more is imported
        from nexus.cli._telemetry import start_telemetry

        start_telemetry(config, args)
    if config.capture_path is not None:  # $NEXUS_CAPTURE_DIR, when set, still wins
        from nexus.llm.capture import set_capture_dir

        set_capture_dir(config.capture_path)
    choice = resolve_default_model(config, explicit=getattr(args, "model", None))
    label = (getattr(args, "session", None) or DEFAULT_SESSION).strip()
    if not label:
        raise ConfigError("the session label is empty: give one with -s LABEL, or leave -s out for 'main'")
    check_model(config, choice.ref)  # before the ledger exists: a run that cannot start writes nothing
    from nexus.ledger.labels import label_problem

    problem = label_problem(label)  # refused for a new session only: an older one stays usable
    if problem is not None and not config.database_path.exists():  # no ledger: the session is new
        raise ConfigError(f"--session: {problem}")
    # paths of the right kind, directories created (the tools need the workspace), database writable
    prepare_state(config)
    from nexus.llm.providers._llama_progress import TerminalProgress, set_progress_reporter

    set_progress_reporter(TerminalProgress(sys.stderr))  # a local model's loading/prefill, on a terminal only
    ledger = Ledger.open(config.database_path)
    ledger.database.on_busy = BusyNotice()
    try:
        recovered = ledger.recover()
    except BaseException:
        ledger.close()
        raise
    if recovered:
        from nexus.cli._errors import recovered_notice

        print(recovered_notice(ledger, recovered), file=sys.stderr)
    runtime = Runtime(config, ledger, label, choice.ref, getattr(args, "thinking", None))
    if problem is not None and not runtime.session_exists():
        ledger.close()
        raise ConfigError(f"--session: {problem}")
    return runtime


class BusyNotice:
    """``Database.on_busy`` for the CLI: say why nothing happens while another process holds agents.db.

    Said again only after a quiet spell of :attr:`REPEAT_S` (every write of a run finds the
    database locked while that process holds it).
    """

    REPEAT_S = 30.0

    def __init__(self) -> None:
        self.last = -self.REPEAT_S

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.REPEAT_S:
            from nexus.ledger._sqlite import WAIT_ENV, wait_bound

            print(
                f"nexus: waiting for the database (held by another process); giving up after {wait_bound():g} s "
                f"({WAIT_ENV})",
                file=sys.stderr,
                flush=True,
            )
        self.last = now


def check_model(config: NexusConfig, ref: str) -> None:
    """ConfigError (exit 2) unless ``ref`` names a model this setup can call: known provider, key, local id.

    The fallbacks count: a run may start when one of them is usable.
    """
    from nexus.engine.wiring.runner import preflight, resolve_model

    primary = resolve_model(config, ref)
    fallbacks = [resolve_model(config, other) for other in config.fallbacks if other != ref]
    preflight(config, primary, fallbacks)


# --------------------------------------------------------------------------- signals


def run_with_signals(
    loop: asyncio.AbstractEventLoop, start: Callable[[AbortSignal], Coroutine[Any, Any, T]]
) -> tuple[T | None, bool, bool]:
    """Run ``start(abort)`` to completion: ``(value, interrupted, terminated)``.

    SIGINT/SIGTERM fire ``abort`` (the engine then records the turn ``aborted`` with its
    partial output); a second signal stops waiting (value ``None``; the open turn is closed
    as aborted by the next start-up's ``recover()``).
    """
    from nexus.llm.abort import AbortSignal

    abort = AbortSignal()
    state = {"interrupted": False, "terminated": False, "count": 0}
    task: asyncio.Task[T] = loop.create_task(start(abort))

    def on_signal(signum: int) -> None:
        state["count"] += 1
        state["interrupted" if signum == signal_module.SIGINT else "terminated"] = True
        if state["count"] == 1:
            abort.abort("interrupted by the user (Ctrl-C)" if signum == signal_module.SIGINT else "terminated")
        else:
            task.cancel()

    installed = []
    for signum in (signal_module.SIGINT, signal_module.SIGTERM):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / not Unix
            pass
    value: T | None = None
    try:
        value = loop.run_until_complete(task)
    except asyncio.CancelledError:
        value = None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return value, bool(state["interrupted"]), bool(state["terminated"])


# --------------------------------------------------------------------------- manual compaction


def compact_now(runtime: Runtime, focus: str | None = None) -> str:
    """Summarise the older part of the session now (chat's ``/compact``, ``nexus sessions compact``).

    The engine does the work (:meth:`EngineEnv.compact`: lock, cut, summary, compaction turn);
    this runs it on the process's loop with Ctrl-C aborting it, and returns its one-line report.
    """
    from nexus.cli._render import describe_engine_event

    env = runtime.engine_env()
    notices = TextRenderer()

    def on_event(event: EngineEvent) -> None:  # retries, waits, fallbacks: the one-line report covers the rest
        if event.type not in ("compaction_start", "compaction_end"):
            notices.notice(*describe_engine_event(event))

    def start(abort: AbortSignal) -> Coroutine[Any, Any, SessionCompaction]:
        return env.compact(runtime.session, focus=focus, model=runtime.model, on_event=on_event, signal=abort)

    outcome, _, _ = run_with_signals(runtime.loop, start)
    if outcome is None:
        return "compaction interrupted: nothing was changed"
    return outcome.message
