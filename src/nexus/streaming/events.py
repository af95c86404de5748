"""``StreamEvent``: what the broker emits while a run streams, and what ``stream`` adapters read (seed 004).

A tagged union of slotted dataclasses, matched on ``type``; Python attributes are
snake_case, the JSON is exactly the seed's (``runId``, ``sessionLabel``, ``toolName``,
``toolCallId``)::

    stream_start{runId, sessionLabel, target} | token{text} | reasoning{text}
    | tool_status{toolName, toolCallId, status, summary?} | stream_end{runId, final}
    | stream_error{error, partial}

One delivery is ``stream_start``, then content, ``stream_end{final:false}`` after each model
call that ends in tool calls, and ``stream_end{final:true}`` (or ``stream_error``) last.
``to_line`` is the hot path of the native router (one JSONL line per event), so it builds the
line by hand for tokens instead of going through a dict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nexus.adapters import DeliveryTarget, ProtocolError

if TYPE_CHECKING:
    from nexus.engine import ToolState
_TOOL_STATES = ("started", "completed", "failed")
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(slots=True)
class StreamStart:
    """A delivery begins: the run, its session and where the reply goes."""

    run_id: str
    session_label: str
    target: DeliveryTarget
    type: Literal["stream_start"] = "stream_start"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "runId": self.run_id,
            "sessionLabel": self.session_label,
            "target": self.target.to_json(),
        }


@dataclass(slots=True)
class Token:
    """A piece of reply text, as fast as the model produces it."""

    text: str
    type: Literal["token"] = "token"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(slots=True)
class Reasoning:
    """A piece of extended-thinking text (forwarded only where the channel asks for it)."""

    text: str
    type: Literal["reasoning"] = "reasoning"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(slots=True)
class ToolStatus:
    """A tool call started, completed or failed; ``summary`` is a short human line ("Read package.json")."""

    tool_name: str
    tool_call_id: str
    status: ToolState
    summary: str | None = None
    type: Literal["tool_status"] = "tool_status"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "toolName": self.tool_name,
            "toolCallId": self.tool_call_id,
            "status": self.status,
        }
        if self.summary is not None:
            out["summary"] = self.summary
        return out


@dataclass(slots=True)
class StreamEnd:
    """A model call ended: ``final=False`` when tool calls follow, ``final=True`` at the end of the run."""

    run_id: str
    final: bool = True
    type: Literal["stream_end"] = "stream_end"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "runId": self.run_id, "final": self.final}


@dataclass(slots=True)
class StreamError:
    """The run failed or was cut; ``partial`` is true when some text had already been delivered."""

    error: str
    partial: bool
    type: Literal["stream_error"] = "stream_error"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "error": self.error, "partial": self.partial}


StreamEvent: TypeAlias = StreamStart | Token | Reasoning | ToolStatus | StreamEnd | StreamError
"""Every event of a delivery (seed 004)."""


def to_line(event: StreamEvent) -> bytes:
    """The event as one JSONL line (UTF-8, ending in ``\\n``), as written to a ``stream`` adapter's stdin."""
    if type(event) is Token:
        return b'{"type":"token","text":' + _dumps(event.text).encode() + b"}\n"
    return (_dumps(event.to_json()) + "\n").encode()


def is_terminal(event: StreamEvent) -> bool:
    """True for the event that closes a delivery: ``stream_end{final:true}`` or ``stream_error``."""
    return (type(event) is StreamEnd and event.final) or type(event) is StreamError


def from_json(data: object) -> StreamEvent:
    """Parse one event from its JSON object; a wrong shape raises :class:`ProtocolError` with the reason."""
    if not isinstance(data, dict):
        raise ProtocolError(f"a stream event must be a JSON object, got {type(data).__name__}")
    kind = str(data.get("type"))
    try:
        parsed: StreamEvent = _PARSERS[kind](data)
        return parsed
    except KeyError as exc:
        if kind not in _PARSERS:
            raise ProtocolError(f"unknown stream event type {kind!r}") from None
        raise ProtocolError(f"{kind} needs {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"bad {kind} event: {exc}") from None


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name!r} must be a string")
    return value


def _tool_status(data: dict[str, Any]) -> ToolStatus:
    status = data["status"]
    if status not in _TOOL_STATES:
        raise ValueError(f"status must be one of {', '.join(_TOOL_STATES)}")
    summary = data.get("summary")
    return ToolStatus(
        _text(data["toolName"], "toolName"),
        _text(data["toolCallId"], "toolCallId"),
        status,
        None if summary is None else _text(summary, "summary"),
    )


_PARSERS: dict[str, Any] = {
    "stream_start": lambda d: StreamStart(
        _text(d["runId"], "runId"),
        _text(d.get("sessionLabel", d.get("sessionKey", "")), "sessionLabel"),
        DeliveryTarget.from_json(d["target"]),
    ),
    "token": lambda d: Token(_text(d["text"], "text")),
    "reasoning": lambda d: Reasoning(_text(d["text"], "text")),
    "tool_status": _tool_status,
    "stream_end": lambda d: StreamEnd(_text(d["runId"], "runId"), bool(d.get("final", True))),
    "stream_error": lambda d: StreamError(_text(d["error"], "error"), bool(d.get("partial", False))),
}
