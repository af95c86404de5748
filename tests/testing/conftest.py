"""Helpers for the nexus.testing tests: an independent SSE reader so the wire format is checked by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from nexus.testing.pytest_plugin import fake_provider, scripted_model

__all__ = ["fake_provider", "scripted_model"]

SSEEvent = tuple[str | None, str]


def parse_sse(raw: bytes) -> list[SSEEvent]:
    """Split a complete SSE body into (event name, data) pairs; asserts every event is well terminated."""
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), f"stream does not end with a blank line: {text[-40:]!r}"
    events: list[SSEEvent] = []
    for block in text[:-2].split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            else:
                raise AssertionError(f"unexpected SSE line {line!r}")
        events.append((name, "\n".join(data)))
    return events


def data_json(raw: bytes) -> list[dict[str, Any]]:
    """The JSON payloads of the events (``[DONE]`` excluded)."""
    return [json.loads(data) for _, data in parse_sse(raw) if data != "[DONE]"]


@pytest.fixture
def sse() -> Callable[[bytes], list[SSEEvent]]:
    """The SSE splitter as a fixture."""
    return parse_sse


@pytest.fixture
def sse_json() -> Callable[[bytes], list[dict[str, Any]]]:
    """The SSE JSON payload extractor as a fixture."""
    return data_json
