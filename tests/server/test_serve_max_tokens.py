"""``max_tokens`` on the OpenAI facade is honoured: the model is asked for at most that many tokens.

A real ``nexus serve`` over the loopback fake provider, which records what it was asked: in the
agent's own session (through the broker's queue) and in another session (run at once), the
provider's request carries the client's limit, and a reply the model cut at the limit finishes
with ``length``, as OpenAI's would.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import reply, text

from .test_serve_process import _nexus, _serving, _stop, _write_config

pytestmark = pytest.mark.slow  # a real process


def test_max_tokens_reaches_the_model_and_a_cut_reply_finishes_with_length(isolated_env: Path) -> None:
    steps = [reply(text("cut sh"), stop_reason="length"), text("whole"), reply(text("side cut"), stop_reason="length")]
    with FakeProviderServer(*steps) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            ask = {"model": "coder", "messages": [{"role": "user", "content": "tell me"}]}
            own = httpx.post(f"{url}/v1/chat/completions", json={**ask, "max_tokens": 7}, timeout=30)
            assert own.status_code == 200, own.text
            assert own.json()["choices"][0]["finish_reason"] == "length"
            assert provider.requests[-1].body["max_tokens"] == 7  # type: ignore[index]
            whole = httpx.post(f"{url}/v1/chat/completions", json=ask, timeout=30)
            assert whole.json()["choices"][0]["finish_reason"] == "stop"
            assert "max_tokens" not in (provider.requests[-1].body or {})  # the next turn has no limit
            side = httpx.post(
                f"{url}/v1/chat/completions", json={**ask, "max_completion_tokens": 9, "stream": True},
                headers={"x-nexus-session": "side"}, timeout=30,
            )  # fmt: skip
            assert side.status_code == 200 and '"finish_reason":"length"' in side.text, side.text
            assert provider.requests[-1].body["max_tokens"] == 9  # type: ignore[index]
            both = httpx.post(
                f"{url}/v1/chat/completions", json={**ask, "max_tokens": 5, "max_completion_tokens": 9}, timeout=30
            )
            assert both.status_code == 400 and both.json()["error"]["param"] == "max_tokens"
            _stop(process)
