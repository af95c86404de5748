"""How ``nexus run`` and ``nexus chat`` show a run: streamed text, or one JSON event per line.

Two renderers share one small interface (:class:`Renderer`) so the code that drives the
engine does not care which one is active:

- :class:`TextRenderer`: the reply goes to stdout as it arrives (flushed per delta, so a
  pipe sees it at once); tool activity, reasoning and notices (retries, fallbacks,
  compaction) go to stderr, so ``nexus run "…" > reply.txt`` captures only the reply.
- :class:`JsonRenderer`: the ``--json`` event stream, one object per line on stdout. The
  shapes follow the streaming bridge's ``StreamEvent`` (seed 004: camelCase keys) plus a few
  event types of our own; docs/cli.md lists them all and they do not change incompatibly.

Only stdlib imports: this module is loaded before the engine on every run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, TextIO

from nexus._dataclass import dataclass
from nexus.cli._input import printable

if TYPE_CHECKING:
    from nexus.engine import EngineEvent

__all__ = [
    "JSON_EVENT_TYPES",
    "JsonRenderer",
    "Renderer",
    "RunStart",
    "RunSummary",
    "TextRenderer",
    "describe_engine_event",
    "format_args",
    "summarize_result",
    "use_color",
]

JSON_EVENT_TYPES: tuple[str, ...] = (
    "stream_start",
    "token",
    "reasoning",
    "tool_status",
    "retry",
    "wait",
    "fallback",
    "compaction_start",
    "compaction_end",
    "stream_error",
    "stream_end",
)
"""Every ``type`` a ``--json`` line can have (documented in docs/cli.md)."""

_ARG_CHARS = 60
_SUMMARY_CHARS = 100


@dataclass(slots=True, frozen=True)
class RunStart:
    """What is known when a run begins (the ``stream_start`` event)."""

    run_id: str
    session_label: str
    model: str
    session_created: bool = False


@dataclass(slots=True)
class RunSummary:
    """How a run ended (the ``stream_end`` event, and the exit code of ``nexus run``).

    ``status`` is the ledger's turn status: ``completed``, ``failed`` or ``aborted``.
    ``usage_estimated`` says the token counts are chars/4 estimates (the server reported none).
    """

    run_id: str
    session_label: str
    status: str
    stop_reason: str
    turn_id: str | None = None
    model: str = ""
    text: str = ""
    error: str | None = None
    error_kind: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    usage_estimated: bool = False
    cost: float = 0.0
    duration_ms: int = 0
    session_created: bool = False
    session_restored: bool = False
    """The session was archived and this run's turn restored it (a turn is activity: it lists again)."""
    tool_calls: int = 0


def use_color(stream: TextIO) -> bool:
    """ANSI styling only on a terminal, and never when ``NO_COLOR`` is set (no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _short(value: object, limit: int = _ARG_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())  # newlines and runs of spaces → one space
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_args(args: Mapping[str, Any]) -> str:
    """``path=README.md limit=20``: a tool call's arguments on one short line.

    Long string values (file contents, patches) are shown by size only, so a ``write`` of a
    large file does not flood the terminal.
    """
    parts = []
    for key, value in args.items():
        if isinstance(value, str) and ("\n" in value or len(value) > 2 * _ARG_CHARS) and key != "command":
            parts.append(f"{key}=<{len(value)} chars>")
        else:
            parts.append(f"{key}={_short(value)}")
    return " ".join(parts)


def _result_text(result: object) -> str:
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(getattr(block, "text", "")) for block in content)
    return "" if result is None else str(result)


def summarize_result(tool_name: str, result: object, is_error: bool) -> str:
    """A few words on what a tool did: ``12 lines`` / ``exit 1`` / the first line of an error."""
    details = getattr(result, "details", None)
    details = details if isinstance(details, dict) else {}
    text = _result_text(result).strip()
    exit_code = details.get("exit_code")
    if is_error:
        if details.get("timed_out"):
            return "timed out"
        if details.get("aborted"):
            return "aborted"
        if isinstance(exit_code, int) and exit_code != 0:
            return f"exit {exit_code}"
        first = text.splitlines()[0] if text else "failed"
        return _short(first, _SUMMARY_CHARS)
    if isinstance(exit_code, int):
        lines = len(text.splitlines())
        return f"exit {exit_code}, {lines} line{'s' if lines != 1 else ''}"
    if isinstance(details.get("bytes"), int):
        return f"{details['bytes']} bytes"
    lines = len(text.splitlines())
    return f"{lines} line{'s' if lines != 1 else ''}"


def _seconds(delay: float) -> str:
    """``2.0s``, ``0.2s``, ``0.05s``: a short wait is not rounded to a misleading ``0.0s``.

    Waits under a second are shown to the hundredth (at least ``0.01s``): a cooldown read a few
    microseconds after it started is ``0.01s``, not ``0.0099s``.
    """
    return f"{max(round(delay, 2), 0.01):g}s" if delay < 1 else f"{delay:.1f}s"


def describe_engine_event(event: EngineEvent) -> tuple[str, str, dict[str, Any]]:
    """``(json type, one-line notice, json fields)`` for a retry, wait, fallback or compaction event."""
    from nexus.engine import CompactionStartEvent, FallbackEvent, RetryEvent, WaitEvent

    if isinstance(event, RetryEvent):
        # the event is only sent when a retry follows; name another key only when it is another
        switch = event.next_profile is not None and event.next_profile != event.profile
        nxt = f" with profile {event.next_profile}" if switch else ""
        wait = f"retrying in {_seconds(event.delay_s)}" if event.delay_s > 0 else "retrying now"
        text = f"↻ {event.model}: {event.error_kind} (attempt {event.attempt}), {wait}{nxt}: {event.message}"
        data = {
            "attempt": event.attempt,
            "model": event.model,
            "profile": event.profile,
            "nextProfile": event.next_profile,
            "errorKind": event.error_kind,
            "delaySeconds": event.delay_s,
            "message": event.message,
        }
        return "retry", _short(text, 200), data
    if isinstance(event, WaitEvent):
        wait = _seconds(event.delay_s)
        if event.keys > 1:
            text = f"… every key of {event.provider} is cooling down after errors; waiting {wait}"
        else:
            text = f"… {event.provider} is cooling down after an error; waiting {wait} before calling it"
        data = {"provider": event.provider, "profile": event.profile, "delaySeconds": event.delay_s}
        return "wait", text, {**data, "keys": event.keys}
    if isinstance(event, FallbackEvent):
        verb = "skipping" if event.skipped else "falling back to"
        text = f"⇢ {event.from_model}: {verb} {event.to_model} ({event.reason})"
        data = {"fromModel": event.from_model, "toModel": event.to_model, "reason": event.reason}
        return "fallback", _short(text, 200), {**data, "skipped": event.skipped}
    if isinstance(event, CompactionStartEvent):
        count = f"{event.message_count} message{'s' if event.message_count != 1 else ''}"
        text = f"⋯ compacting the conversation ({count}, ~{event.tokens_before} tokens)"
        data = {"reason": event.reason, "messageCount": event.message_count, "tokensBefore": event.tokens_before}
        return "compaction_start", text, data
    result = event.result
    if result is None:
        text = f"⋯ compaction did not help: {event.error}"
        return "compaction_end", _short(text, 200), {"error": event.error, "willRetry": event.will_retry}
    text = f"⋯ compacted: ~{result.tokens_before} → ~{result.tokens_after} tokens"
    data = {"tokensBefore": result.tokens_before, "tokensAfter": result.tokens_after, "willRetry": event.will_retry}
    return "compaction_end", text, {**data, "error": None}


class Renderer:
    """Receives the run as it happens; subclasses decide how it looks. Every method is cheap."""

    def start(self, info: RunStart) -> None:
        """The run began."""

    def text(self, delta: str) -> None:
        """More reply text."""

    def reasoning(self, delta: str) -> None:
        """More reasoning text (thinking blocks)."""

    def message_end(self) -> None:
        """An assistant message ended (more may follow after tool calls)."""

    def tool_start(self, call_id: str, name: str, args: Mapping[str, Any]) -> None:
        """A tool call starts running."""

    def tool_end(self, call_id: str, name: str, result: object, is_error: bool) -> None:
        """A tool call finished (``result`` is an ``AgentToolResult``)."""

    def notice(self, kind: str, text: str, data: Mapping[str, Any]) -> None:
        """A retry, wait, fallback or compaction; ``kind`` is its JSON event type."""

    def error(self, message: str, kind: str | None = None) -> None:
        """The run failed or was aborted (before :meth:`finish`)."""

    def finish(self, summary: RunSummary) -> None:
        """The run is over and written to the ledger."""


class TextRenderer(Renderer):
    """Reply on stdout, everything else on stderr (dimmed reasoning, tool lines, notices)."""

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        show_reasoning: bool = False,
        color: bool | None = None,
        quiet_session: bool = False,
    ) -> None:
        self._out = out if out is not None else sys.stdout
        self._err = err if err is not None else sys.stderr
        self._show_reasoning = show_reasoning
        self._color = use_color(self._err) if color is None else color
        self._quiet_session = quiet_session
        self._mid_line = False  # stdout holds reply text not ended by a newline
        self._in_reasoning = False
        self._wrote_text = False
        self._separate = False  # a new assistant message starts: put it on a new line

    def _style(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self._color else text

    def _err_line(self, line: str) -> None:
        self._end_reasoning()
        if self._mid_line and self._color:
            # both streams usually share one terminal: do not glue the notice onto the reply
            self._err.write("\n")
        self._err.write(line + "\n")
        self._err.flush()

    def _end_reasoning(self) -> None:
        if self._in_reasoning:
            self._err.write(self._style("0", "") + "\n" if self._color else "\n")
            self._err.flush()
            self._in_reasoning = False

    def text(self, delta: str) -> None:
        """Write the delta to stdout and flush, so pipes and terminals see it immediately."""
        if not delta:
            return
        self._end_reasoning()
        if self._separate and self._mid_line:
            self._out.write("\n")
        self._separate = False
        self._out.write(delta)
        self._out.flush()
        self._wrote_text = True
        self._mid_line = not delta.endswith("\n")

    def reasoning(self, delta: str) -> None:
        """Dimmed on stderr, and only when asked for with ``--thinking``."""
        if not self._show_reasoning or not delta:
            return
        self._in_reasoning = True
        self._err.write(self._style("2", delta))
        self._err.flush()

    def message_end(self) -> None:
        """Later text starts on its own line."""
        self._end_reasoning()
        self._separate = True

    def tool_start(self, call_id: str, name: str, args: Mapping[str, Any]) -> None:
        """``→ read path=README.md``."""
        shown = format_args(args)  # the model's own text: its control characters as escapes, never raw
        self._err_line(self._style("36", printable(f"→ {name}" + (f" {shown}" if shown else ""))))

    def tool_end(self, call_id: str, name: str, result: object, is_error: bool) -> None:
        """``✓ read (12 lines)`` or ``✗ bash: exit 1``."""
        summary = printable(summarize_result(name, result, is_error))
        if is_error:
            self._err_line(self._style("31", f"✗ {name}: {summary}"))
        else:
            self._err_line(self._style("32", f"✓ {name} ({summary})"))

    def notice(self, kind: str, text: str, data: Mapping[str, Any]) -> None:
        """One yellow line per retry, wait, fallback or compaction."""
        self._err_line(self._style("33", text))

    def error(self, message: str, kind: str | None = None) -> None:
        """Nothing here: ``nexus run`` prints the error after the reply has been closed."""

    def finish(self, summary: RunSummary) -> None:
        """Close the reply line; say which session a new conversation went into."""
        self._end_reasoning()
        if self._mid_line:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False
        if summary.session_created and not self._quiet_session:
            self._err_line(self._style("2", f"session: {summary.session_label} (new)"))
        elif summary.session_restored:  # said even in chat: the session was hidden from every list until now
            self._err_line(self._style("2", f"session: {summary.session_label} (was archived: restored by this turn)"))


class JsonRenderer(Renderer):
    """``--json``: one JSON object per line on stdout, flushed per line."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self._partial = False

    def emit(self, event: dict[str, Any]) -> None:
        """Write one event line."""
        self._out.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self._out.flush()

    def start(self, info: RunStart) -> None:
        """``stream_start``."""
        self.emit(
            {
                "type": "stream_start",
                "runId": info.run_id,
                "sessionLabel": info.session_label,
                "model": info.model,
                "sessionCreated": info.session_created,
            }
        )

    def text(self, delta: str) -> None:
        """``token``."""
        if delta:
            self._partial = True
            self.emit({"type": "token", "text": delta})

    def reasoning(self, delta: str) -> None:
        """``reasoning`` (always emitted: consumers decide whether to show it)."""
        if delta:
            self.emit({"type": "reasoning", "text": delta})

    def tool_start(self, call_id: str, name: str, args: Mapping[str, Any]) -> None:
        """``tool_status`` with ``status: started`` and the arguments."""
        self._partial = True
        self.emit(
            {"type": "tool_status", "toolName": name, "toolCallId": call_id, "status": "started", "args": dict(args)}
        )

    def tool_end(self, call_id: str, name: str, result: object, is_error: bool) -> None:
        """``tool_status`` with ``status: completed | failed`` and a short summary."""
        self.emit(
            {
                "type": "tool_status",
                "toolName": name,
                "toolCallId": call_id,
                "status": "failed" if is_error else "completed",
                "summary": summarize_result(name, result, is_error),
            }
        )

    def notice(self, kind: str, text: str, data: Mapping[str, Any]) -> None:
        """``retry`` / ``wait`` / ``fallback`` / ``compaction_start`` / ``compaction_end``."""
        self.emit({"type": kind, **data, "text": text})

    def error(self, message: str, kind: str | None = None) -> None:
        """``stream_error``: ``partial`` says whether output had already been sent."""
        self.emit({"type": "stream_error", "error": message, "kind": kind, "partial": self._partial})

    def finish(self, summary: RunSummary) -> None:
        """``stream_end`` with the result summary."""
        self.emit(
            {
                "type": "stream_end",
                "runId": summary.run_id,
                "final": True,
                "sessionLabel": summary.session_label,
                "sessionCreated": summary.session_created,
                "sessionRestored": summary.session_restored,
                "turnId": summary.turn_id,
                "status": summary.status,
                "stopReason": summary.stop_reason,
                "model": summary.model,
                "text": summary.text,
                "error": summary.error,
                "usage": summary.usage,
                "usageEstimated": summary.usage_estimated,
                "cost": summary.cost,
                "toolCalls": summary.tool_calls,
                "durationMs": summary.duration_ms,
            }
        )
