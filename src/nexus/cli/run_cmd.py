"""``nexus run``: one message to a session's agent, the reply streamed, the turn in the ledger.

The pieces here are shared with ``nexus chat``: :func:`open_runtime` loads the config,
picks the model, opens the ledger and closes turns a crashed process left open;
:class:`Runtime` runs one turn through the engine and renders it as it streams.

Exit codes: 0 the turn completed; 1 it failed or was aborted (the message is on stderr and
the turn is in the ledger with status ``failed``/``aborted``); 2 bad arguments or config;
130 interrupted with Ctrl-C (the run is aborted first, so its partial reply is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import signal as signal_module
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nexus.cli._render import JsonRenderer, Renderer, RunStart, RunSummary, TextRenderer
from nexus.errors import ConfigError, NexusError

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.engine import AgentResult, EngineEvent
    from nexus.ledger import Ledger
    from nexus.llm.abort import AbortSignal
    from nexus.llm.events import AssistantMessageEvent
    from nexus.llm.options import StreamFn, StreamOptions
    from nexus.llm.types import Context, Model

__all__ = ["DEFAULT_SESSION", "Runtime", "exit_code", "open_runtime", "read_message", "run_command"]

DEFAULT_SESSION = "main"
"""The session ``nexus run`` and ``nexus chat`` use when ``-s`` is not given."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``nexus run`` (called by ``nexus.cli.main``); returns the exit code."""
    renderer: Renderer = JsonRenderer() if args.json else TextRenderer(show_reasoning=_wants_reasoning(args))
    try:
        message = read_message(args.message)
        runtime = open_runtime(args)
    except NexusError as exc:
        if args.json:  # a JSON consumer gets the failure in-band too
            renderer.error(str(exc), "config" if isinstance(exc, ConfigError) else "error")
        raise
    with runtime:
        outcome = runtime.run_turn_sync(message, renderer)
    if outcome.summary is not None and outcome.summary.status != "completed" and not args.json:
        print(f"nexus: {_failure_line(outcome.summary)}", file=sys.stderr)
    return exit_code(outcome)


def _wants_reasoning(args: argparse.Namespace) -> bool:
    return getattr(args, "thinking", None) not in (None, "off")


def read_message(raw: str, stdin: Any = None) -> str:
    """The message argument, or all of stdin for ``-``; an empty message is a usage error (exit 2)."""
    if raw == "-":
        source = sys.stdin if stdin is None else stdin
        if source is None or (hasattr(source, "isatty") and source.isatty()):
            raise ConfigError("MESSAGE is '-' but stdin is a terminal: pipe the message in, e.g. echo hi | nexus run -")
        raw = source.read()
    text = raw.strip()
    if not text:
        raise ConfigError("the message is empty: give the text to send, e.g. nexus run \"hello\"")
    return text


def _failure_line(summary: RunSummary) -> str:
    if summary.status == "aborted":
        return f"run aborted: {summary.error or 'stopped before it finished'} (partial reply kept in the ledger)"
    kind = f" ({summary.error_kind})" if summary.error_kind else ""
    return f"run failed{kind}: {summary.error or 'unknown error'}"


# --------------------------------------------------------------------------- runtime


@dataclass(slots=True)
class TurnOutcome:
    """What happened to one turn: its summary (None if it never finished) and whether Ctrl-C stopped it."""

    summary: RunSummary | None
    interrupted: bool = False
    terminated: bool = False


def exit_code(outcome: TurnOutcome) -> int:
    """0 completed, 1 failed/aborted, 130 Ctrl-C, 143 SIGTERM."""
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
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client, the event loop and the ledger."""
        if self._loop is not None and not self._loop.is_closed():
            from nexus.llm._http import aclose_client

            try:
                self._loop.run_until_complete(aclose_client())
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
        """Run one turn on the process's loop; Ctrl-C aborts it (a second Ctrl-C stops waiting)."""
        return run_with_signals(self.loop, lambda abort: self.run_turn(message, renderer, abort))

    async def run_turn(self, message: str, renderer: Renderer, abort: AbortSignal) -> RunSummary:
        """Run one turn through the engine, streaming into ``renderer``; the engine writes the ledger."""
        created = not self.session_exists()
        head_before = _head_id(self.ledger, self.session) if not created else None
        bridge = _Bridge(renderer)
        started = time.monotonic()
        run_id = _new_run_id()
        renderer.start(RunStart(run_id, self.session, self.model, created))
        result = await _call_engine(self, message, bridge, abort)
        summary = _summarize(self, result, run_id, created, head_before, started)
        if summary.status != "completed":
            renderer.error(summary.error or summary.status, summary.error_kind)
        renderer.finish(summary)
        return summary


def open_runtime(args: argparse.Namespace) -> Runtime:
    """Load config, resolve the model (ConfigError → exit 2), open the ledger and recover crashed turns."""
    from nexus.config import load_config, resolve_default_model
    from nexus.ledger import Ledger

    config = load_config(getattr(args, "config", None))
    choice = resolve_default_model(config, explicit=getattr(args, "model", None))
    label = (getattr(args, "session", None) or DEFAULT_SESSION).strip()
    if not label:
        raise ConfigError("the session label is empty: give one with -s LABEL, or leave -s out for 'main'")
    path = config.database_path
    path.parent.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.open(path)
    try:
        recovered = ledger.recover()
    except BaseException:
        ledger.close()
        raise
    if recovered:
        noun = "turn" if len(recovered) == 1 else "turns"
        print(f"nexus: closed {len(recovered)} {noun} left open by a stopped process (as aborted)", file=sys.stderr)
    return Runtime(config, ledger, label, choice.ref, getattr(args, "thinking", None))


def _head_id(ledger: Ledger, label: str) -> str | None:
    head = ledger.head(label)
    return head.id if head is not None else None


def _new_run_id() -> str:
    from nexus.engine.types import new_id

    return f"run_{new_id().lower()}"


# --------------------------------------------------------------------------- signals


def run_with_signals(
    loop: asyncio.AbstractEventLoop, start: Callable[[AbortSignal], Any]
) -> TurnOutcome:
    """Run ``start(abort)`` to completion; SIGINT/SIGTERM fire ``abort`` (the engine records the turn aborted).

    A second signal stops waiting for the engine (the open turn is closed as aborted by the
    next start-up's ``recover()``).
    """
    from nexus.llm.abort import AbortSignal

    abort = AbortSignal()
    state = {"interrupted": False, "terminated": False, "count": 0}
    task = loop.create_task(start(abort))

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
    try:
        summary = loop.run_until_complete(task)
    except asyncio.CancelledError:
        summary = None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return TurnOutcome(summary, bool(state["interrupted"]), bool(state["terminated"]))


# --------------------------------------------------------------------------- engine bridge


class _Bridge:
    """Engine callbacks → renderer calls; also remembers each tool call's arguments for the ``→`` line."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.args: dict[str, Mapping[str, Any]] = {}
        self.tool_calls = 0

    def on_partial_reply(self, text: str) -> None:
        self.renderer.text(text)

    def on_reasoning(self, text: str) -> None:
        self.renderer.reasoning(text)

    def on_tool_result(self, call_id: str, name: str, status: str, summary: str | None) -> None:
        if status == "started":
            self.tool_calls += 1
            self.renderer.message_end()
            self.renderer.tool_start(call_id, name, self.args.get(call_id, {}))
        else:
            self.renderer.tool_end(call_id, name, _SummaryResult(summary or ""), status == "failed")

    def on_agent_event(self, phase: str, timestamp_ms: int) -> None:
        if phase == "streaming":
            self.renderer.message_end()

    def on_engine_event(self, event: EngineEvent) -> None:
        kind, text, data = describe_engine_event(event)
        self.renderer.notice(kind, text, data)

    def wrap_stream(self, inner: StreamFn) -> StreamFn:
        """A stream function that notes each finished tool call's arguments, then passes events on."""
        seen = self.args

        async def stream(model: Model, context: Context, options: StreamOptions | None = None) -> AsyncIterator[
            AssistantMessageEvent
        ]:
            async for event in inner(model, context, options):
                if event.type == "toolcall_end":
                    seen[event.tool_call.id] = dict(event.tool_call.arguments)
                yield event

        return stream


@dataclass(slots=True)
class _SummaryResult:
    """A tool result known only by the engine's summary text (what ``on_tool_result`` gives)."""

    text: str

    @property
    def content(self) -> str:
        return self.text


def describe_engine_event(event: EngineEvent) -> tuple[str, str, dict[str, Any]]:
    """``(json type, one-line notice, json fields)`` for a retry, wait, fallback or compaction event."""
    kind = event.type
    if kind == "retry":
        nxt = f", next profile {event.next_profile}" if event.next_profile else ""
        wait = f", retrying in {event.delay_s:.1f}s" if event.delay_s > 0 else ", retrying now"
        text = f"↻ {event.model}: {event.error_kind} (attempt {event.attempt}){nxt}{wait}: {event.message}"
        data = {
            "attempt": event.attempt,
            "model": event.model,
            "profile": event.profile,
            "nextProfile": event.next_profile,
            "errorKind": event.error_kind,
            "delaySeconds": event.delay_s,
            "message": event.message,
        }
        return "retry", _one_line(text), data
    if kind == "wait":
        text = f"… every key of {event.provider} is cooling down; waiting {event.delay_s:.1f}s"
        return "wait", text, {"provider": event.provider, "profile": event.profile, "delaySeconds": event.delay_s}
    if kind == "fallback":
        verb = "skipping" if event.skipped else "falling back to"
        text = f"⇢ {event.from_model}: {verb} {event.to_model} ({event.reason})"
        data = {"fromModel": event.from_model, "toModel": event.to_model, "reason": event.reason}
        return "fallback", _one_line(text), {**data, "skipped": event.skipped}
    if kind == "compaction_start":
        text = f"⋯ compacting the conversation ({event.message_count} messages, ~{event.tokens_before} tokens)"
        data = {"reason": event.reason, "messageCount": event.message_count, "tokensBefore": event.tokens_before}
        return "compaction_start", text, data
    result = event.result
    if result is None:
        text = f"⋯ compaction did not help: {event.error}"
        return "compaction_end", _one_line(text), {"error": event.error, "willRetry": event.will_retry}
    text = f"⋯ compacted: ~{result.tokens_before} → ~{result.tokens_after} tokens"
    data = {"tokensBefore": result.tokens_before, "tokensAfter": result.tokens_after, "willRetry": event.will_retry}
    return "compaction_end", text, {**data, "error": None}


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def _call_engine(runtime: Runtime, message: str, bridge: _Bridge, abort: AbortSignal) -> AgentResult:
    from nexus.engine import EngineCallbacks, run_agent
    from nexus.llm import stream

    callbacks = EngineCallbacks(
        on_partial_reply=bridge.on_partial_reply,
        on_reasoning_stream=bridge.on_reasoning,
        on_tool_result=bridge.on_tool_result,
        on_agent_event=bridge.on_agent_event,
        on_engine_event=bridge.on_engine_event,
    )
    config = runtime.config
    if runtime.thinking is not None and runtime.thinking != config.thinking:
        config = _with_thinking(config, runtime.thinking)
    return await run_agent(
        message,
        session=runtime.session,
        model=runtime.model,
        config=config,
        ledger=runtime.ledger,
        callbacks=callbacks,
        signal=abort,
        stream_fn=bridge.wrap_stream(stream),
    )


def _with_thinking(config: NexusConfig, level: str) -> NexusConfig:
    copy = config.model_copy(update={"thinking": level})
    copy._home = config._home
    copy._source = config._source
    return copy


def _summarize(
    runtime: Runtime, result: AgentResult, run_id: str, created: bool, head_before: str | None, started: float
) -> RunSummary:
    from nexus.engine.ledger_map import turn_status
    from nexus.llm.types import AssistantMessage

    head_after = _head_id(runtime.ledger, runtime.session) if runtime.session_exists() else None
    turn_id = head_after if head_after != head_before else None
    text = ""
    for message in reversed(result.messages):
        if message.role == "assistant":
            text = message.content
            break
    cost = 0.0
    for message in result.messages:
        if isinstance(message.message, AssistantMessage):
            cost += message.message.usage.cost.total
    usage = result.usage
    return RunSummary(
        run_id=run_id,
        session_label=runtime.session,
        status=turn_status(result),
        stop_reason=result.stop_reason,
        turn_id=turn_id,
        model=runtime.model,
        text=text,
        error=result.error.message if result.error else None,
        error_kind=result.error.kind if result.error else None,
        usage={
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cacheRead": usage.cached_input_tokens,
            "cacheWrite": usage.cache_write_tokens,
            "reasoning": usage.reasoning_tokens,
            "total": usage.total_tokens,
        },
        cost=round(cost, 6),
        duration_ms=result.duration_ms or int((time.monotonic() - started) * 1000),
        session_created=created,
        tool_calls=len(result.tool_calls),
    )
