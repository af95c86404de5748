"""Step constructors: what a scripted model or the fake provider server does for one request.

A script is a FIFO of steps; each model request consumes one. The same steps drive both
:class:`~nexus.testing.ScriptedModel` (in-process events) and
:class:`~nexus.testing.FakeProviderServer` (real HTTP + SSE on loopback), so a test can
move from one to the other without rewriting its script.

``text("hi")``, ``thinking("hmm")`` and ``tool_call("read", {...})`` are each a whole
response on their own; ``reply(...)`` joins several of them into one response.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nexus.errors import NexusError
from nexus.llm import Context, ImageContent, TextContent, ToolResultMessage, Usage, UserMessage

if TYPE_CHECKING:
    from nexus.llm import CaptureRecord

OverflowStyle: TypeAlias = Literal["auto", "anthropic", "openai", "llama.cpp"]
"""Whose wording an overflow error uses; ``auto`` follows the endpoint (server) or model api."""


class ScriptError(NexusError, ValueError):
    """A script (step list or JSON script file) is malformed; the message says which step and why."""


# --------------------------------------------------------------------------- response parts


@dataclass(slots=True, frozen=True)
class TextPart:
    """A text block of a scripted response."""

    text: str


@dataclass(slots=True, frozen=True)
class ThinkingPart:
    """A reasoning block; ``signature`` is what Anthropic sends as ``signature_delta``."""

    thinking: str
    signature: str = "sig-scripted"


@dataclass(slots=True, frozen=True)
class ToolCallPart:
    """A tool call; ``id`` is generated per response when not given."""

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None


Part: TypeAlias = TextPart | ThinkingPart | ToolCallPart


@dataclass(slots=True, frozen=True)
class Reply:
    """One successful response made of parts, in order.

    ``stop_reason`` defaults to ``tool_use`` when a tool call is present, else ``stop``;
    ``usage`` overrides the chars/4 estimate (``input``/``output``/``cache_read`` are used).
    """

    parts: tuple[Part, ...]
    stop_reason: Literal["stop", "length", "tool_use"] | None = None
    usage: Usage | None = None

    @property
    def effective_stop_reason(self) -> Literal["stop", "length", "tool_use"]:
        """The stop reason the response ends with."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(p, ToolCallPart) for p in self.parts) else "stop"


# --------------------------------------------------------------------------- failures


@dataclass(slots=True, frozen=True)
class HttpError:
    """The provider answers with an HTTP error status (no stream at all)."""

    status: int
    message: str | None = None
    retry_after: float | None = None
    body: Mapping[str, Any] | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Overflow:
    """A context-window overflow error worded like the provider ``style`` words it (HTTP 400)."""

    style: OverflowStyle = "auto"
    tokens: int = 250_000
    maximum: int = 200_000


@dataclass(slots=True, frozen=True)
class Stall:
    """Stream ``then`` but go silent for ``seconds`` after ``after_chunks`` events (the fake server: or until
    ``release`` is set, for a test that needs the reply held until it has done something, however slow the
    machine: a fixed 12 s ran out at load 20 before five ``nexus send`` processes had queued their messages)."""

    after_chunks: int
    seconds: float
    then: Reply
    release: threading.Event | None = field(default=None, compare=False)


@dataclass(slots=True, frozen=True)
class Cut:
    """Stream ``after_chunks`` events of ``of``, then drop the connection (no terminator)."""

    after_chunks: int
    of: Reply


@dataclass(slots=True, frozen=True)
class Malformed:
    """Stream ``after_chunks`` events of ``of``, then a data line that is not valid JSON, then the rest."""

    after_chunks: int
    data: str
    of: Reply


@dataclass(slots=True, frozen=True)
class StreamError:
    """Stream ``after_chunks`` events of ``of``, then an in-stream error event (HTTP status was 200)."""

    after_chunks: int
    status: int
    message: str | None
    of: Reply


@dataclass(slots=True, frozen=True)
class HtmlError:
    """A proxy's HTML error page (``text/html``) instead of a JSON error."""

    status: int = 502


@dataclass(slots=True, frozen=True)
class Replay:
    """Serve a capture (``NEXUS_CAPTURE_DIR``) back: its status, headers and body, byte for byte.

    ``piece_bytes`` cuts the body into pieces of that many bytes, each flushed on its own
    (a decoder must not care where the network splits a stream); ``None`` sends it whole.
    A capture whose exchange ended in an error (a cut connection) is cut again after its body.
    """

    path: Path
    record: CaptureRecord = field(repr=False, compare=False)
    piece_bytes: int | None = None


@dataclass(slots=True, frozen=True)
class FromContext:
    """Decide the step from what the model was sent: ``fn(context) -> step``."""

    fn: Callable[[Context], Step]


Step: TypeAlias = (
    Reply | HttpError | Overflow | Stall | Cut | Malformed | StreamError | HtmlError | Replay | FromContext
)
"""Anything a script may hold."""


# --------------------------------------------------------------------------- constructors


def text(content: str) -> Reply:
    """A response with one text block."""
    return Reply((TextPart(content),))


def thinking(content: str, signature: str = "sig-scripted") -> Reply:
    """A response with one thinking block (combine with ``reply`` to add text after it)."""
    return Reply((ThinkingPart(content, signature),))


def tool_call(name: str, args: Mapping[str, Any] | None = None, id: str | None = None) -> Reply:
    """A response that calls tool ``name`` with ``args`` (stop reason ``tool_use``)."""
    return Reply((ToolCallPart(name, dict(args or {}), id),))


def reply(
    *parts: Reply | Part,
    stop_reason: Literal["stop", "length", "tool_use"] | None = None,
    usage: Usage | None = None,
) -> Reply:
    """Join parts (or whole single-part responses) into one response, in order."""
    flat: list[Part] = []
    for item in parts:
        if isinstance(item, Reply):
            flat.extend(item.parts)
        elif isinstance(item, TextPart | ThinkingPart | ToolCallPart):
            flat.append(item)
        else:
            raise ScriptError(f"reply() takes text()/thinking()/tool_call() parts, got {type(item).__name__}")
    return Reply(tuple(flat), stop_reason, usage)


def http_error(
    status: int,
    message: str | None = None,
    retry_after: float | None = None,
    body: Mapping[str, Any] | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> HttpError:
    """An HTTP error response; ``retry_after`` adds a ``retry-after`` header (seconds)."""
    if not 400 <= status <= 599:
        raise ScriptError(f"http_error status must be 400..599, got {status}")
    return HttpError(status, message, retry_after, body, dict(headers or {}))


def overflow(style: OverflowStyle = "auto", tokens: int = 250_000, maximum: int = 200_000) -> Overflow:
    """A context-overflow error (``prompt is too long`` / ``maximum context length`` …)."""
    if style not in ("auto", "anthropic", "openai", "llama.cpp"):
        raise ScriptError(f"overflow style must be auto, anthropic, openai or llama.cpp, got {style!r}")
    return Overflow(style, tokens, maximum)


def stall(
    after_chunks: int = 2, seconds: float = 30.0, then: Reply | None = None, release: threading.Event | None = None
) -> Stall:
    """A stream that goes quiet for ``seconds`` after ``after_chunks`` events, then finishes ``then``; on the
    fake server, setting ``release`` ends the silence early."""
    _check_count("stall", after_chunks)
    return Stall(after_chunks, seconds, then if then is not None else text("late"), release)


def cut(after_chunks: int = 3, of: Reply | None = None) -> Cut:
    """A stream whose connection is dropped after ``after_chunks`` events."""
    _check_count("cut", after_chunks)
    return Cut(after_chunks, of if of is not None else text("partial words that never finish"))


def malformed(after_chunks: int = 1, data: str = '{"choices": [{"delta": ', of: Reply | None = None) -> Malformed:
    """A stream with one invalid JSON data line after ``after_chunks`` events."""
    _check_count("malformed", after_chunks)
    return Malformed(after_chunks, data, of if of is not None else text("text around a broken line"))


def stream_error(
    after_chunks: int = 2, status: int = 529, message: str | None = None, of: Reply | None = None
) -> StreamError:
    """A provider error sent inside a started stream (Anthropic ``event: error``, OpenAI ``data: {"error": ...}``).

    ``status`` picks the error type (529 = overloaded, 429 = rate limit, 500 = api error …).
    """
    _check_count("stream_error", after_chunks)
    return StreamError(after_chunks, status, message, of if of is not None else text("words before the error"))


def html_error(status: int = 502) -> HtmlError:
    """An HTML error page with ``status`` (what a proxy or load balancer sends)."""
    return HtmlError(status)


def replay(path: str | Path, piece_bytes: int | None = None) -> Replay:
    """Serve the capture file at ``path`` (read now: a bad file fails the test at once, naming it)."""
    from nexus.llm import CaptureFormatError, load_capture

    if piece_bytes is not None and piece_bytes < 1:
        raise ScriptError(f"replay(piece_bytes=...) must be >= 1, got {piece_bytes}")
    try:
        record = load_capture(path)
    except CaptureFormatError as exc:
        raise ScriptError(str(exc)) from exc
    return Replay(Path(path), record, piece_bytes)


def from_context(fn: Callable[[Context], Step]) -> FromContext:
    """A step computed from the context the model receives (e.g. answer by the last message)."""
    return FromContext(fn)


def _check_count(name: str, after_chunks: int) -> None:
    if after_chunks < 0:
        raise ScriptError(f"{name}(after_chunks=...) must be >= 0, got {after_chunks}")


def last_user_text(context: Context) -> str:
    """The text of the last user message (or tool result) in ``context``; ``""`` if none."""
    for message in reversed(context.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return "".join(b.text for b in message.content if isinstance(b, TextContent))
        if isinstance(message, ToolResultMessage):
            return "".join(b.text for b in message.content if not isinstance(b, ImageContent))
    return ""


echo: FromContext = FromContext(lambda context: text(last_user_text(context)))
"""Answer with the last user text: the fake server's optional default when its script is empty."""


def resolve(step: Step, context: Context) -> Step:
    """Follow ``from_context`` steps until a concrete one (bounded, to catch self-loops)."""
    for _ in range(16):
        if not isinstance(step, FromContext):
            return step
        step = step.fn(context)
        if not isinstance(step, _STEP_TYPES):
            raise ScriptError(f"from_context function returned {type(step).__name__}, expected a step")
    raise ScriptError("from_context steps nested more than 16 deep")


_STEP_TYPES = (Reply, HttpError, Overflow, Stall, Cut, Malformed, StreamError, HtmlError, Replay, FromContext)


def check_step(step: object, where: str = "step") -> Step:
    """Return ``step`` if it is a step, else raise :class:`ScriptError` naming it."""
    if not isinstance(step, _STEP_TYPES):
        raise ScriptError(f"{where}: expected a step from nexus.testing.steps, got {type(step).__name__}")
    return step


# --------------------------------------------------------------------------- JSON scripts


def steps_from_json(data: object) -> list[Step]:
    """Parse a JSON script (a list of step objects) as used by ``python -m nexus.testing.fake_server``.

    Shapes: ``{"text": .., "thinking": .., "tool_calls": [{"name", "arguments", "id"}], "stop_reason": ..}``,
    ``{"http_error": 429, "message": .., "retry_after": 1}``, ``{"overflow": "anthropic"}``,
    ``{"html_error": 502}``, ``{"stall": {"after_chunks": 2, "seconds": 5, "then": {..}}}``,
    ``{"cut": {"after_chunks": 3, "of": {..}}}``, ``{"malformed": {"after_chunks": 1, "of": {..}}}``,
    ``{"stream_error": {"after_chunks": 2, "status": 529}}``, ``{"replay": "bug.capture", "piece_bytes": 37}``,
    ``{"echo": true}``.
    """
    if not isinstance(data, list):
        raise ScriptError(f"a JSON script must be a list of step objects, got {type(data).__name__}")
    return [_step_from_json(item, f"step {i}") for i, item in enumerate(data)]


def _step_from_json(item: object, where: str) -> Step:
    if not isinstance(item, dict):
        raise ScriptError(f"{where}: expected an object, got {json.dumps(item)[:60]}")
    try:
        return _step_from_dict(item, where)
    except (TypeError, ValueError, KeyError) as exc:
        if isinstance(exc, ScriptError):
            raise
        raise ScriptError(f"{where}: {exc!s} in {json.dumps(item)[:80]}") from exc


def _step_from_dict(item: dict[str, Any], where: str) -> Step:
    if "http_error" in item:
        return http_error(int(item["http_error"]), item.get("message"), item.get("retry_after"), item.get("body"))
    if "overflow" in item:
        return overflow(item["overflow"], int(item.get("tokens", 250_000)), int(item.get("maximum", 200_000)))
    if "html_error" in item:
        return html_error(int(item["html_error"]))
    if "replay" in item:
        pieces = item.get("piece_bytes")
        return replay(str(item["replay"]), int(pieces) if pieces is not None else None)
    if item.get("echo"):
        return echo
    builders = (
        ("stall", _stall_json),
        ("cut", _cut_json),
        ("malformed", _malformed_json),
        ("stream_error", _stream_error_json),
    )
    for key, build in builders:
        if key in item:
            sub = item[key]
            if not isinstance(sub, dict):
                raise ScriptError(f"{where}: {key!r} must be an object")
            return build(sub, where)
    if any(k in item for k in ("text", "thinking", "tool_calls")):
        return _reply_json(item, where)
    raise ScriptError(
        f"{where}: unknown step {json.dumps(item)[:80]}; expected one of text/thinking/tool_calls, "
        "http_error, overflow, html_error, stall, cut, malformed, stream_error, replay, echo"
    )


def _reply_json(item: dict[str, Any], where: str) -> Reply:
    parts: list[Part] = []
    if item.get("thinking"):
        parts.append(ThinkingPart(str(item["thinking"])))
    if item.get("text"):
        parts.append(TextPart(str(item["text"])))
    for call in item.get("tool_calls") or []:
        if not isinstance(call, dict) or "name" not in call:
            raise ScriptError(f"{where}: each tool call needs a 'name', got {json.dumps(call)[:60]}")
        parts.append(ToolCallPart(str(call["name"]), dict(call.get("arguments") or {}), call.get("id")))
    stop = item.get("stop_reason")
    if stop not in (None, "stop", "length", "tool_use"):
        raise ScriptError(f"{where}: stop_reason must be stop, length or tool_use, got {stop!r}")
    return Reply(tuple(parts), stop)


def _inner_reply(sub: dict[str, Any], key: str, where: str) -> Reply | None:
    inner = sub.get(key)
    if inner is None:
        return None
    if not isinstance(inner, dict):
        raise ScriptError(f"{where}: {key!r} must be a reply object")
    return _reply_json(inner, where)


def _stall_json(sub: dict[str, Any], where: str) -> Step:
    return stall(int(sub.get("after_chunks", 2)), float(sub.get("seconds", 30.0)), _inner_reply(sub, "then", where))


def _cut_json(sub: dict[str, Any], where: str) -> Step:
    return cut(int(sub.get("after_chunks", 3)), _inner_reply(sub, "of", where))


def _malformed_json(sub: dict[str, Any], where: str) -> Step:
    data = str(sub.get("data", '{"choices": [{"delta": '))
    return malformed(int(sub.get("after_chunks", 1)), data, _inner_reply(sub, "of", where))


def _stream_error_json(sub: dict[str, Any], where: str) -> Step:
    message = sub.get("message")
    of = _inner_reply(sub, "of", where)
    return stream_error(int(sub.get("after_chunks", 2)), int(sub.get("status", 529)), message, of)
