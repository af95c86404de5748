"""The CLI's conversation: the engine's ``Runtime`` plus the session, model and thinking level chat changes.

``nexus run`` and ``nexus chat`` open one with :func:`open_conversation` (config, model check,
ledger, crashed turns closed) and run each message through ``Runtime.start`` like every other
entry point, on one event loop for the process; Ctrl-C or SIGTERM aborts the run (its partial
output is kept). ``/compact`` and ``nexus sessions compact`` use :func:`compact_now`.
"""

from __future__ import annotations

import asyncio
import signal as signal_module
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from nexus._dataclass import dataclass
from nexus.cli._closed_output import ClosedOutputGuard
from nexus.cli._engine_bridge import RenderBridge, summarize_run
from nexus.cli._render import Renderer, RunSummary, TextRenderer
from nexus.errors import NexusError, UsageError
from nexus.ledger import DEFAULT_SESSION

if TYPE_CHECKING:
    import argparse

    from nexus.config import NexusConfig
    from nexus.engine import EngineEvent, Runtime, SessionCompaction
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal, Model

T = TypeVar("T")


@dataclass(slots=True)
class TurnExit:
    """How one turn of the CLI ended: its summary (None if it never finished) and what stopped it."""

    summary: RunSummary | None
    interrupted: bool = False
    terminated: bool = False
    output_closed: bool = False


@dataclass(slots=True)
class Conversation:
    """The engine runtime, and the session label, model and thinking level of the CLI's next turn."""

    engine: Runtime
    session: str
    model: str
    thinking: str | None = None
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thinking_noted: set[str] = field(default_factory=set, repr=False)

    @property
    def config(self) -> NexusConfig:
        """The loaded ``nexus.toml``."""
        return self.engine.config

    @property
    def ledger(self) -> Ledger:
        """The open ledger."""
        return self.engine.ledger

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the MCP servers, the HTTP client, the ledger and the event loop."""
        loop = self.loop
        if loop.is_closed():
            return
        from nexus.llm import aclose_client

        try:
            if self.engine.mcp is not None:
                loop.run_until_complete(self.engine.mcp.close())  # the MCP servers this process started
            loop.run_until_complete(aclose_client())
            loop.run_until_complete(loop.shutdown_asyncgens())
            # join worker threads (the local model's generation) while the loop can still take their results
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
            self.ledger.close()  # the loop is not running: waiting here holds nobody

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """One event loop for the whole process (the HTTP client and its connections live on it)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` (ledger calls, between turns) to its end on the process's loop."""
        return self.loop.run_until_complete(work)

    def resolve(self, label: str) -> str:
        """The label of the session ``label`` names (a label or an alias); ``SessionNotFound``."""
        return self.wait(self.ledger.sessions.resolve(label)).label

    def session_exists(self, label: str | None = None) -> bool:
        """Whether the session (label or alias) already exists in the ledger."""
        from nexus.ledger import SessionNotFound

        try:
            self.resolve(label or self.session)
        except SessionNotFound:
            return False
        return True

    def run_turn_sync(self, message: str, renderer: Renderer) -> TurnExit:
        """Run one turn on the process's loop; Ctrl-C aborts it (a second Ctrl-C stops waiting).

        A closed stdout (the reader of a pipe went away) aborts the run too, quietly.
        """
        guards: list[ClosedOutputGuard] = []

        def start(abort: AbortSignal) -> Coroutine[Any, Any, RunSummary]:
            guard = ClosedOutputGuard(renderer, lambda: abort.abort("stdout was closed by its reader"))
            guards.append(guard)
            return self.run_turn(message, guard, abort)

        summary, interrupted, terminated = run_with_signals(self.loop, start)
        return TurnExit(summary, interrupted, terminated, output_closed=any(g.closed for g in guards))

    async def run_turn(self, message: str, renderer: Renderer, abort: AbortSignal) -> RunSummary:
        """Run one turn through ``Runtime.start``, streaming into ``renderer``; the engine writes the ledger."""
        from nexus.engine import AgentSpec, EventContext, local_timezone

        began = time.monotonic()
        model = self.engine.model(self.model)
        self.note_thinking(model)
        status = await self.status(self.session)
        existed = status is not None
        spec = AgentSpec(model=model, thinking=self.thinking)  # type: ignore[arg-type]
        event = EventContext(timezone=local_timezone(), channel="cli")
        execution = await self.engine.begin(spec, self.session, message, signal=abort, event=event)
        bridge = RenderBridge(renderer, self.ledger, self.model, existed)
        execution.on_event(bridge.on_event)  # the task starts at the next await: no event is missed
        try:
            result = await execution.result
        finally:
            bridge.close(execution)
        if not execution.started:  # aborted while another run of the session held its lock
            label = execution.session_label
            raise NexusError(f"interrupted while waiting for another run of session {label}; nothing was sent")
        summary = summarize_run(result, execution, self.model, bridge.created, began)
        summary.session_restored = status == "archived" and result.turn_id is not None  # the turn restored it
        if summary.status != "completed":
            from nexus.cli._errors import cli_text

            renderer.error(cli_text(summary.error or summary.status), summary.error_kind)
        renderer.finish(summary)
        return summary

    async def status(self, label: str) -> str | None:
        """The session's status (``active``, ``archived``), ``None`` when the ledger has no such session."""
        from nexus.ledger import SessionNotFound

        try:
            return (await self.ledger.sessions.resolve(label)).status
        except SessionNotFound:
            return None

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


def open_conversation(args: argparse.Namespace) -> Conversation:
    """Load config, resolve the model (ConfigError → exit 2), open the ledger and recover crashed turns."""
    from nexus.cli._ledger import ledger_exists
    from nexus.cli._state import make_workspace, prepare_state
    from nexus.config import load_config, resolve_default_model
    from nexus.engine import Runtime

    config = load_config(getattr(args, "config", None))
    if config.telemetry.tracing:  # off (the default): nothing more is imported
        from nexus.cli._telemetry import start_telemetry

        start_telemetry(config, args)
    if config.capture_path is not None:  # $NEXUS_CAPTURE_DIR, when set, still wins
        from nexus.llm import set_capture_dir

        set_capture_dir(config.capture_path)
    choice = resolve_default_model(config, explicit=getattr(args, "model", None))
    given = getattr(args, "session", None)
    label = DEFAULT_SESSION if given is None else given  # as typed: ' lead' is not 'lead' (refused below if new;
    if not label.strip():  # an older session of that name stays usable) and -s "" is empty, not "no -s"
        raise UsageError("the session label is empty: give one with -s LABEL, or leave -s out for 'main'")
    check_model(config, choice.ref)  # before the ledger exists: a run that cannot start writes nothing
    from nexus.ledger import label_problem

    problem = label_problem(label)  # refused for a new session only: an older one stays usable
    if problem is not None and not ledger_exists(config):  # no ledger: the session is new
        raise UsageError(f"--session: {problem}")
    # paths of the right kind, directories created (the workspace beside an SQLite ledger), database writable
    prepare_state(config)
    isatty = getattr(sys.stderr, "isatty", None)
    if callable(isatty) and isatty():  # a local model's loading/prefill line (TerminalProgress shows none on a pipe)
        from nexus.llm import TerminalProgress, set_progress_reporter

        set_progress_reporter(TerminalProgress(sys.stderr))
    loop = asyncio.new_event_loop()  # the process's one loop: the ledger's connections (PostgreSQL) live on it
    try:
        ledger = loop.run_until_complete(_open_ledger(config))
    except BaseException:
        loop.close()
        raise
    make_workspace(config)  # once the ledger is reached: a server out of reach leaves nothing behind
    conversation = Conversation(Runtime(config, ledger), label, choice.ref, getattr(args, "thinking", None), loop)
    if problem is not None and not conversation.session_exists():
        conversation.close()
        raise UsageError(f"--session: {problem}")
    return conversation


async def _open_ledger(config: NexusConfig) -> Ledger:
    """The config's ledger, the turns killed processes left open closed (and said)."""
    from nexus.cli._ledger import BusyNotice, recover_open_turns
    from nexus.ledger import Ledger

    ledger = await Ledger.connect(config.database_target)
    try:
        if ledger.inline:
            ledger.database.on_busy = BusyNotice()
        await recover_open_turns(ledger)
    except BaseException:
        await ledger.aclose()
        raise
    return ledger


def check_model(config: NexusConfig, ref: str) -> None:
    """ConfigError (exit 2) unless ``ref`` names a model this setup can call: known provider, key, local id.

    The fallbacks count: a run may start when one of them is usable.
    """
    from nexus.engine import preflight, resolve_model

    primary = resolve_model(config, ref)
    fallbacks = [resolve_model(config, other) for other in config.fallbacks if other != ref]
    preflight(config, primary, fallbacks)


def run_with_signals(
    loop: asyncio.AbstractEventLoop, start: Callable[[AbortSignal], Coroutine[Any, Any, T]]
) -> tuple[T | None, bool, bool]:
    """Run ``start(abort)`` to completion: ``(value, interrupted, terminated)``.

    SIGINT/SIGTERM fire ``abort`` (the engine then records the turn ``aborted`` with its
    partial output); a second signal stops waiting (value ``None``; the open turn is closed
    as aborted by the next start-up's ``recover()``).
    """
    from nexus.llm import AbortSignal

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


def compact_now(conversation: Conversation, focus: str | None = None) -> str:
    """Summarise the older part of the session now (chat's ``/compact``, ``nexus sessions compact``).

    The engine does the work (``Runtime.compact``: lock, cut, summary, compaction turn); this
    runs it on the process's loop with Ctrl-C aborting it, and returns its one-line report.
    """
    from nexus.cli._render import describe_engine_event

    notices = TextRenderer()

    def on_event(event: EngineEvent) -> None:  # retries, waits, fallbacks: the one-line report covers the rest
        if event.type not in ("compaction_start", "compaction_end"):
            notices.notice(*describe_engine_event(event))

    def start(abort: AbortSignal) -> Coroutine[Any, Any, SessionCompaction]:
        return conversation.engine.compact(
            conversation.session, focus=focus, model=conversation.model, on_event=on_event, signal=abort
        )

    outcome, _, _ = run_with_signals(conversation.loop, start)
    if outcome is None:
        return "compaction interrupted: nothing was changed"
    return outcome.message
