"""Server-sent-events parsing from raw byte chunks.

Providers stream one SSE event per token, so this sits on the hot path. Instead of a
line iterator (one Python call per line, one decode per line) the parser keeps a byte
buffer, decodes everything up to the last complete event in one go and splits that
text on blank lines. The two common shapes take a fast path: a single ``data:`` line
(OpenAI) and an ``event:`` line followed by one ``data:`` line (Anthropic).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# the C scanner json.loads itself ends up in (typeshed does not declare the attribute)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class SSEParser:
    """Incremental SSE decoder: :meth:`feed` bytes, get ``(event_name, data)`` pairs.

    ``event_name`` is ``None`` when the event had no ``event:`` field. Comment lines,
    ``id:`` and ``retry:`` are ignored; several ``data:`` lines are joined with ``\\n``
    as the SSE spec says. Invalid UTF-8 is replaced, never raised.
    """

    __slots__ = ("_buf", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        """Add ``chunk``; return the events it completed (possibly none)."""
        if b"\r" in chunk or self._pending_cr:
            chunk = self._normalise(chunk)
        buf = self._buf + chunk if self._buf else chunk
        cut = buf.rfind(b"\n\n")
        if cut < 0:
            self._buf = buf
            return []
        self._buf = buf[cut + 2 :]
        text = buf[:cut].decode("utf-8", "replace")
        out: list[tuple[str | None, str]] = []
        for block in text.split("\n\n"):
            if block.startswith("data: "):
                if "\n" not in block:  # OpenAI: one data line
                    out.append((None, block[6:]))
                    continue
            elif block.startswith("event: "):  # Anthropic: an event line, then one data line
                head, _, rest = block.partition("\n")
                if rest.startswith("data: ") and "\n" not in rest:
                    out.append((head[7:], rest[6:]))
                    continue
            if block:
                parsed = _parse_block(block)
                if parsed is not None:
                    out.append(parsed)
        return out

    def flush(self) -> list[tuple[str | None, str]]:
        """Events left in the buffer when the stream ended without a final blank line."""
        rest, self._buf = self._buf, b""
        if not rest.strip():
            return []
        parsed = _parse_block(rest.decode("utf-8", "replace").strip("\n"))
        return [parsed] if parsed is not None else []

    def _normalise(self, chunk: bytes) -> bytes:
        # CRLF and lone CR are legal line ends; a CR at the end of one chunk may pair
        # with an LF at the start of the next.
        if self._pending_cr:
            self._pending_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if chunk.endswith(b"\r"):
            self._pending_cr = True
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _parse_block(block: str) -> tuple[str | None, str] | None:
    """One event block (lines without the blank separator) → (event, data) or None."""
    name: str | None = None
    data: list[str] = []
    for line in block.split("\n"):
        if not line or line[0] == ":":
            continue
        field, sep, value = line.partition(":")
        if not sep:
            field, value = line, ""
        elif value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if not data and name is None:
        return None
    return name, "\n".join(data)


def parse_data(data: str) -> Any:
    """``json.loads(data)``, minus its Python wrapper layers on the common case.

    ``json.loads`` runs three Python frames and two whitespace regex matches around the C
    scanner: a large share of a streamed token's cost (``bench/bench_stream.py --parts``
    shows both, see docs/benchmarks.md). A payload that starts
    and ends with its JSON value (what providers send) goes to the C scanner directly;
    anything else (surrounding whitespace, trailing data, invalid JSON) falls back to
    ``json.loads`` so the result and the errors (``ValueError``) are exactly its own.
    """
    try:
        value, end = _scan_once(data, 0)
    except StopIteration:
        return json.loads(data)
    if end != len(data):
        return json.loads(data)
    return value


__all__ = ["SSEParser", "parse_data"]
