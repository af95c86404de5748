"""Every retry notice is true: the exact notice lines and final error of each failure, through the engine.

Issue 8, items 14 and 15: a refused local connection was a 7 s ``timeout``; a 401 said
"retrying now" and was not retried; ``Retry-After: 3600`` said "retrying in 3600.0s" and failed
at once; a 529 ended as ``rate_limit``; an overflow said "even after compaction" when nothing was
compacted. Each scenario runs a real engine against a real loopback socket (the fake provider
server, or a port nobody listens on) and compares the notices the CLI would print, line by line.
"""

from __future__ import annotations

import json
import re
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nexus.cli._render import describe_engine_event
from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, Runtime
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.steps import cut, http_error, overflow, stall, text

PEER_CLOSED = "peer closed connection without sending complete message body (incomplete chunked read)"


def shown(line: str) -> str:
    """A notice as the CLI prints it: one line of at most 200 characters."""
    return line if len(line) <= 200 else line[:199] + "…"


def closed_port() -> int:
    """A loopback port with no listener (bound, then released): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def configure(home: Path, base_url: str, keys: str = 'api_key = "test"', agent: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n{agent}\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{base_url}"\n{keys}\n',
        encoding="utf-8",
    )


async def run_turn(
    ledger: Ledger, message: str = "hi", *, cooldowns: ProfileCooldowns | None = None
) -> tuple[Any, list[str]]:
    """One engine run of the configured default model; returns (result, the notice lines the CLI prints)."""
    env = Runtime(load_config(), ledger, limits=EngineLimits(), cooldowns=cooldowns or ProfileCooldowns())
    notices: list[str] = []
    callbacks = EngineCallbacks(on_engine_event=lambda event: notices.append(describe_engine_event(event)[1]))
    model = env.model(None)
    result = await env.start(AgentSpec(model=model), "main", message, callbacks=callbacks).result
    return result, notices


async def test_refused_local_connection_is_network_with_one_quick_retry(ledger: Ledger, isolated_env: Path) -> None:
    port = closed_port()
    configure(isolated_env, f"http://127.0.0.1:{port}/v1")
    result, notices = await run_turn(ledger)
    reason = (
        f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: connection refused; is the server running?"
    )
    # one quick retry (0.2 s, not the 1-2-4 s backoff), then the run fails as `network`, not `timeout`
    assert notices == [shown(f"↻ fake/fake-model: network (attempt 1), retrying in 0.2s: {reason}")]
    assert result.error is not None and (result.error.kind, result.error.message) == ("network", reason)
    assert result.error.retryable


async def test_cut_before_content_is_network_and_retried_once(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(cut(after_chunks=1, of=text("never")), text("second try")) as server:
        configure(isolated_env, server.openai_base_url)
        result, notices = await run_turn(ledger)
        url = f"{server.openai_base_url}/chat/completions"
    reason = f"the connection to {url} broke before the response finished: {PEER_CLOSED}"
    assert notices == [shown(f"↻ fake/fake-model: network (attempt 1), retrying in 0.2s: {reason}")]
    assert result.error is None and result.messages[-1].text == "second try"


async def test_a_stalled_server_is_timeout_not_network(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(stall(after_chunks=1, seconds=2, then=text("late")), text("on time")) as server:
        configure(isolated_env, server.openai_base_url, agent="[agent]\nllm_timeout_s = 0.3")
        result, notices = await run_turn(ledger, cooldowns=ProfileCooldowns(initial_s=0.01, max_s=0.04))
        url = f"{server.openai_base_url}/chat/completions"
    said = f"request to {url} timed out (ReadTimeout)"
    assert notices == [f"↻ fake/fake-model: timeout (attempt 1), retrying in 0.01s: {said}"]
    assert result.error is None and result.messages[-1].text == "on time"


async def test_server_crash_mid_reply_is_network_and_not_retried(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(cut(after_chunks=3, of=text("a reply the server never finishes"))) as server:
        configure(isolated_env, server.openai_base_url)
        result, notices = await run_turn(ledger)
        url = f"{server.openai_base_url}/chat/completions"
        assert len(server.requests) == 1
    # text had reached the user: it cannot be taken back, so no retry and no notice claiming one
    assert notices == []
    assert result.error is not None and result.error.kind == "network"
    assert result.error.message == f"the connection to {url} broke before the response finished: {PEER_CLOSED}"


async def test_401_with_a_single_key_is_not_retried(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(http_error(401, "Unauthorized"), default=text("unused")) as server:
        configure(isolated_env, server.openai_base_url)
        result, notices = await run_turn(ledger)
        assert len(server.requests) == 1
    assert notices == []  # no "retrying now" for a retry that does not happen
    assert result.error is not None and result.error.kind == "auth_failure"
    assert result.error.message == "401 invalid_request_error: Unauthorized"


async def test_401_rotates_to_the_other_key_and_says_so(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(http_error(401, "Unauthorized"), text("with key two")) as server:
        keys = 'auth_profiles = [{name = "one", api_key = "k1"}, {name = "two", api_key = "k2"}]'
        configure(isolated_env, server.openai_base_url, keys)
        result, notices = await run_turn(ledger)
    assert notices == [
        "↻ fake/fake-model: auth (attempt 1), retrying now with profile two: 401 invalid_request_error: Unauthorized"
    ]
    assert result.error is None and result.messages[-1].text == "with key two"


async def test_retry_after_beyond_the_wait_cap_fails_at_once_saying_until_when(
    ledger: Ledger, isolated_env: Path
) -> None:
    async with FakeProviderServer(http_error(429, "Rate limit reached", retry_after=3600)) as server:
        configure(isolated_env, server.openai_base_url)
        before = datetime.now(UTC)
        result, notices = await run_turn(ledger)
        after = datetime.now(UTC)
        assert len(server.requests) == 1
    assert notices == []  # no "retrying in 3600.0s" for a retry that will not be made
    assert result.error is not None and result.error.kind == "rate_limit"
    pattern = (
        r"429 requests: Rate limit reached\. Not retried: the server asks to wait 60 min "
        r"\(until ((?:\d{4}-\d\d-\d\d )?\d\d:\d\d) UTC\), longer than a run waits \(60 s\)\. "
        r"Try again after that, or add another key or a fallback model\."
    )
    match = re.fullmatch(pattern, result.error.message)
    assert match is not None, result.error.message
    # the clock alone when the reset is today, with the date when it falls on the next day
    resets = {
        (t + timedelta(seconds=3600)).strftime(
            "%H:%M" if (t + timedelta(seconds=3600)).date() == t.date() else "%Y-%m-%d %H:%M"
        )
        for t in (before, after)
    }
    assert match.group(1) in resets


async def test_529_is_overloaded_from_first_notice_to_final_error(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(*[http_error(529, "Overloaded")] * 4) as server:
        configure(isolated_env, server.openai_base_url)
        result, notices = await run_turn(ledger, cooldowns=ProfileCooldowns(initial_s=0.01, max_s=0.04))
        server.assert_complete()
    said = "529 server_error: Overloaded"
    assert notices == [
        f"↻ fake/fake-model: overloaded (attempt 1), retrying in 0.01s: {said}",
        f"↻ fake/fake-model: overloaded (attempt 2), retrying in 0.02s: {said}",
        f"↻ fake/fake-model: overloaded (attempt 3), retrying in 0.04s: {said}",
    ]
    assert result.error is not None and (result.error.kind, result.error.message) == ("overloaded", said)


async def test_overflow_of_a_tiny_conversation_says_nothing_was_compacted(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(overflow(style="llama.cpp", tokens=4_200, maximum=4_096)) as server:
        configure(isolated_env, server.openai_base_url)
        result, notices = await run_turn(ledger, "hi")
        assert len(server.requests) == 1
        sent = server.requests[0].body or {}
    assert notices == []  # nothing was compacted, so no compaction is announced
    assert result.error is not None and result.error.kind == "context_overflow"
    message = result.error.message
    assert "even after compaction" not in message
    head, _, said = message.partition(" Provider said: ")
    assert re.fullmatch(
        r"The conversation \(about \d+ tokens with the system prompt and tools\) does not fit the context window of "
        r"fake/fake-model \(\d+ tokens\); "
        r"nothing could be made smaller \(nothing was old enough to summarise, no tool result long enough to "
        r"truncate\)\. That is far below the window, so the server's context is probably smaller than configured: "
        r"check the model's context_window against the server's context size\.",
        head,
    ), head
    assert "exceeds the available context size" in said
    # the figure counts what was sent: the system prompt and the tool declarations, not only the two-letter "hi"
    # (it read "about 1 tokens" while the request carried a whole system prompt)
    counted = int(re.search(r"about (\d+) tokens", head).group(1))  # type: ignore[union-attr]
    system = next(m["content"] for m in sent["messages"] if m["role"] == "system")
    assert counted >= (len(system) + len(json.dumps(sent.get("tools", [])))) // 4 * 0.8, (counted, len(system))
