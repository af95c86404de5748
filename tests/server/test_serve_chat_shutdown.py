"""SIGTERM with chat completions in flight: no aborted turn is answered as a finished reply.

The stop aborts the running turns (written ``aborted``) and leaves the messages queued behind them
for the next start. Before the fix, a client whose turn was aborted got a normal completion
(200, ``finish_reason: "stop"``, empty content; a stream that ended with a ``stop`` chunk), and a
client whose message still waited got a 500 with a ``CancelledError`` traceback in the log when
uvicorn's graceful stop ran out. Each must be told the server stopped (docs/server.md, "Stopping").
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall

from .test_serve_process import _nexus, _serving, _stop, _write_config

openai = pytest.importorskip("openai", reason="the facade is tested with the official openai SDK (dev extra)")

pytestmark = pytest.mark.slow


def _complete(url: str, outcomes: dict[str, Any], name: str, *, stream: bool, user: str | None = None) -> None:
    """One chat completion by the SDK (no retries); its outcome: the completion's finish and text, or the error."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    extra = {"user": user} if user else {}
    messages = [{"role": "user", "content": f"job {name}"}]
    try:
        if stream:
            finishes, text = [], ""
            for chunk in client.chat.completions.create(model="coder", messages=messages, stream=True, **extra):
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                    finishes += [chunk.choices[0].finish_reason] if chunk.choices[0].finish_reason else []
            outcomes[name] = ("finished", finishes, text)
        else:
            completion = client.chat.completions.create(model="coder", messages=messages, **extra)
            outcomes[name] = ("finished", completion.choices[0].finish_reason, completion.choices[0].message.content)
    except openai.APIStatusError as exc:
        outcomes[name] = ("status", exc.status_code, exc.message, dict(exc.response.headers))
    except openai.APIError as exc:  # an error event in the stream
        outcomes[name] = ("error_event", exc.message)
    finally:
        client.close()


def _wait(check: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_sigterm_answers_aborted_and_waiting_completions_as_errors_not_replies(isolated_env: Path) -> None:
    stalls = [stall(after_chunks=3, seconds=60) for _ in range(3)]
    with FakeProviderServer(*stalls, default=echo, chunk_chars=2) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        outcomes: dict[str, Any] = {}
        with _serving(isolated_env) as (process, url):
            running = {  # three turns that run and stall: two in per-user sessions, one in the agent's own
                "user-plain": {"stream": False, "user": "alice"},
                "user-stream": {"stream": True, "user": "bob"},
                "own-plain": {"stream": False},
            }
            waiting = {"queued-plain": {"stream": False}, "queued-stream": {"stream": True}}  # behind own-plain
            threads = [
                threading.Thread(target=_complete, args=(url, outcomes, name), kwargs=how)
                for name, how in (*running.items(), *waiting.items())
            ]
            for thread in threads[:3]:
                thread.start()
            _wait(lambda: len(provider.requests) >= 3, "the three turns never reached the model")
            for thread in threads[3:]:
                thread.start()
            _wait(  # own-plain's item runs, the two behind it wait
                lambda: len(httpx.get(f"{url}/v1/agents/coder/queue").json()["items"]) >= 3,
                "the waiting messages were never queued",
            )
            stderr = _stop(process)
            for thread in threads:
                thread.join(30)
                assert not thread.is_alive()
    for name in ("user-plain", "own-plain"):  # the turn was aborted: a 503, never a 200 "stop"
        assert outcomes[name][:2] == ("status", 503), outcomes[name]
        message, headers = outcomes[name][2:]
        assert "shutting down" in message and "aborted" in message and "retry-after" in headers, outcomes[name]
    for name in ("queued-plain",):  # still queued: runs at the next start; sending it again would run it twice
        assert outcomes[name][:2] == ("status", 503), outcomes[name]
        message, headers = outcomes[name][2:]
        assert "stays queued" in message and headers.get("x-should-retry") == "false", outcomes[name]
    assert outcomes["user-stream"][0] == "error_event" and "aborted" in outcomes["user-stream"][1], outcomes
    assert outcomes["queued-stream"][0] == "error_event" and "stays queued" in outcomes["queued-stream"][1], outcomes
    with Ledger.open(isolated_env / "agents.db") as ledger:
        items = BrokerStore(ledger.database).items(agent_id="coder")
        assert sorted(item.status for item in items) == ["delivered", "queued", "queued"], items
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
