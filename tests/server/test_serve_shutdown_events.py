"""SIGTERM while a client watches a run: the run's last event reaches the client before its stream ends.

A web page (or any SSE client) following a session must learn that the run it shows ended;
otherwise it keeps showing a reply that is "still streaming" from a server that is gone.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall

from .test_serve_process import _nexus, _serving, _stop, _write_config

pytestmark = pytest.mark.slow


def _read_events(url: str, events: list[tuple[str, dict[str, object]]], opened: threading.Event) -> None:
    """Collect ``(event name, data)`` pairs until the server ends the stream."""
    name = ""
    with httpx.stream("GET", url, timeout=httpx.Timeout(60, read=60)) as response:
        opened.set()
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((name, json.loads(line.removeprefix("data: "))))


def test_sigterm_ends_the_watched_run_with_a_final_event(isolated_env: Path) -> None:
    with FakeProviderServer(stall(after_chunks=3, seconds=60), default=echo, chunk_chars=2) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            events: list[tuple[str, dict[str, object]]] = []
            opened = threading.Event()
            reader = threading.Thread(
                target=_read_events, args=(f"{url}/v1/sessions/agent:coder/events", events, opened), daemon=True
            )
            reader.start()
            assert opened.wait(30)
            sent = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "long job"})
            assert sent.status_code == 202
            deadline = time.monotonic() + 30
            while not any(name == "token" for name, _ in events):
                assert time.monotonic() < deadline, events
                time.sleep(0.05)
            _stop(process)
            reader.join(30)
            assert not reader.is_alive()
    names = [name for name, _ in events]
    assert names[0] == "stream_start"
    final = [data for name, data in events if name == "stream_error" or (name == "stream_end" and data.get("final"))]
    assert final, f"the stream ended without the run's final event: {names}"
