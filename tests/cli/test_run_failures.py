"""``nexus run`` against failing providers: the exact stderr a user reads (issue 8, items 14, 15 and 17).

Real subprocesses against real loopback sockets: a port nobody listens on, and the fake
provider server answering 429 with ``Retry-After: 3600`` or sending no usage at all.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, text

from .fake_config import write_fake_config

RunNexus = Callable[..., subprocess.CompletedProcess[str]]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_refused_local_server_fails_fast_as_network(nexus: RunNexus, isolated_env: Path) -> None:
    port = _closed_port()
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\n',
        encoding="utf-8",
    )
    result = nexus("run", "hi")
    reason = (
        f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: connection refused; is the server running?"
    )
    assert result.returncode == 1
    assert result.stdout == ""
    notice, *rest = result.stderr.splitlines()
    # the 0.2 s backoff is read when the notice is made: on a busy machine some of it has passed
    retry = re.fullmatch(r"↻ fake/fake-model: network \(attempt 1\), retrying in (0\.[0-9]+)s: (.*)", notice)
    assert retry is not None and 0.1 < float(retry.group(1)) <= 0.2 and retry.group(2) == reason, notice
    assert rest == ["session: main (new)", f"nexus: run failed (network): {reason}"]


def test_retry_after_an_hour_fails_at_once_and_says_until_when(
    nexus: RunNexus, isolated_env: Path, server: FakeProviderServer
) -> None:
    write_fake_config(isolated_env, server)
    server.script(http_error(429, "Rate limit reached", retry_after=3600))
    before = datetime.now(UTC)
    result = nexus("run", "hi")
    after = datetime.now(UTC)
    assert result.returncode == 1
    assert len(server.requests) == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "session: main (new)" and len(lines) == 2, result.stderr  # no retry notice at all
    match = re.fullmatch(
        r"nexus: run failed \(rate_limit\): 429 requests: Rate limit reached\. Not retried: the server asks to "
        r"wait 60 min \(until ((?:\d{4}-\d\d-\d\d )?\d\d:\d\d) UTC\), longer than a run waits \(60 s\)\. "
        r"Try again after that, or add another key or a fallback model\.",
        lines[1],
    )
    assert match is not None, lines[1]
    assert match.group(1) in {_until(t, t + timedelta(hours=1)) for t in (before, after)}


def _until(now: datetime, then: datetime) -> str:
    """How the notice names a time: the clock alone today, with the date when it falls on another day."""
    return then.strftime("%H:%M") if then.date() == now.date() else then.strftime("%Y-%m-%d %H:%M")


def test_missing_usage_is_estimated_and_marked_everywhere(nexus: RunNexus, isolated_env: Path) -> None:
    with FakeProviderServer(text("Hello there, this reply has no usage."), usage=False) as server:
        write_fake_config(isolated_env, server)
        result = nexus("run", "--json", "hi")
    assert result.returncode == 0, result.stderr
    end = json.loads(result.stdout.splitlines()[-1])
    assert end["type"] == "stream_end" and end["usageEstimated"] is True
    usage = end["usage"]
    assert usage["input"] > 0 and usage["output"] == 10  # 37 characters of reply, chars/4 rounded up
    assert usage["total"] == usage["input"] + usage["output"]

    with Ledger.open(isolated_env / "agents.db") as ledger:
        head = run_inline(ledger.sessions.head("main"))
        assert head is not None and head.usage_estimated and head.total_tokens == usage["total"]
        reply = run_inline(ledger.turns.messages(head.id))[-1].message
        assert reply.usage.estimated and reply.usage.output == 10  # type: ignore[union-attr]

    history = nexus("sessions", "history", "main")
    assert f" ~{usage['total']} tokens (estimated) " in history.stdout.splitlines()[0]
    shown = json.loads(nexus("sessions", "show", "main", "--json").stdout)
    assert shown["usage_estimated"] is True and shown["total_tokens"] == usage["total"]
    human = nexus("sessions", "show", "main").stdout
    assert f"~{usage['total']} (estimated: a server reported no usage)" in human
    raw = [json.loads(line) for line in nexus("sessions", "history", "main", "--json").stdout.splitlines()]
    assert raw[-1]["message"]["usage"]["estimated"] is True


def test_missing_usage_on_anthropics_endpoint_is_estimated_and_marked(nexus: RunNexus, isolated_env: Path) -> None:
    with FakeProviderServer(text("Hello there, this reply has no usage."), usage=False) as server:
        isolated_env.mkdir(parents=True, exist_ok=True)
        (isolated_env / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "anthropic-messages"\n'
            f'base_url = "{server.anthropic_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        result = nexus("run", "--json", "hi")
        assert server.requests[-1].path.endswith("/messages")  # Anthropic's wire, not OpenAI's
    assert result.returncode == 0, result.stderr
    end = json.loads(result.stdout.splitlines()[-1])
    assert end["usageEstimated"] is True and end["usage"]["input"] > 0 and end["usage"]["output"] == 10
    with Ledger.open(isolated_env / "agents.db") as ledger:
        head = run_inline(ledger.sessions.head("main"))
        assert head is not None and head.usage_estimated and head.total_tokens == end["usage"]["total"]


def test_reported_usage_is_not_marked_estimated(nexus: RunNexus, home: Path, server: FakeProviderServer) -> None:
    server.script(text("Hello there."))
    result = nexus("run", "--json", "hi")
    end = json.loads(result.stdout.splitlines()[-1])
    assert end["usageEstimated"] is False and end["usage"]["total"] > 0
    history = nexus("sessions", "history", "main").stdout.splitlines()[0]
    assert "estimated" not in history and f" {end['usage']['total']} tokens " in history
