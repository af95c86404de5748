"""A key quoted in a provider's error text reaches no output of ``nexus serve`` (issue 20, item 2).

Real processes: ``nexus serve`` with the builtin Telegram adapter pointed at ``FakeTelegram``, and
``FakeProviderServer`` answering every call with a 401 whose message quotes the configured key, a
key nobody configured, the server's token and the bot token. None of them may appear in the
HTTP 502 body, the OpenAI-style streamed error, the session's SSE ``stream_error``, the queue's
``turn_error``, ``/history``, ``/export``, the Telegram chat, the server's stderr, or anywhere in
the bytes of the SQLite files.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer, FakeTelegram
from nexus.testing.steps import http_error

from .test_serve_process import TOKEN, _nexus, _serving, _stop

pytestmark = pytest.mark.slow  # real processes: a few seconds

KEY = "sk-ant-api03-Qw8rT5yU2iO9pA6sD3fG0hJ7kL4zX1cV_end-to-end"
UNCONFIGURED = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0"
TG_TOKEN = "654321:AAEnd-to-end-telegram-bot-token-0000"
SECRETS = (KEY, UNCONFIGURED, TOKEN, TG_TOKEN)
AUTH = {"authorization": f"Bearer {TOKEN}"}


def _write_config(home: Path, provider: FakeProviderServer, tg: FakeTelegram) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n\n[server]\ntokens = ["${NEXUS_TOKEN}"]\n\n'
        f'[providers.fake]\napi = "openai-completions"\nbase_url = "{provider.openai_base_url}"\napi_key = "{KEY}"\n\n'
        '[adapters.tg]\nbuiltin = "telegram"\n\n'
        '[adapters.tg.accounts.bot]\ncredential = "${TG_TOKEN}"\n'
        f'config = {{ api_base = "{tg.base_url}", edit_interval_ms = 60000 }}\n',
        encoding="utf-8",
    )


def _clean(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} repeats a secret: {text[:400]}"


class _Events:
    """The session's SSE stream, read on a thread until ``stream_error`` arrives."""

    def __init__(self, url: str) -> None:
        self.lines: list[str] = []
        self.connected = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        with httpx.stream("GET", url, headers=AUTH, timeout=60) as response:
            self.connected.set()
            for line in response.iter_lines():
                self.lines.append(line)
                if line.startswith("data:") and '"stream_error"' in line:
                    break
        self.done.set()


def test_a_key_in_a_providers_401_reaches_no_output_no_chat_and_no_byte_of_the_ledger(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_TOKEN", TG_TOKEN)
    refusal = f"invalid x-api-key: {KEY} (the organisation also revoked {UNCONFIGURED}; {TOKEN} {TG_TOKEN})"
    with FakeProviderServer(default=http_error(401, refusal)) as provider, FakeTelegram(token=TG_TOKEN) as tg:
        _write_config(isolated_env, provider, tg)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            completion = httpx.post(
                f"{url}/v1/chat/completions", headers=AUTH, timeout=60,
                json={"model": "coder", "messages": [{"role": "user", "content": "hi"}]},
            )  # fmt: skip
            assert completion.status_code == 502 and "invalid x-api-key" in completion.text, completion.text
            _clean("the 502 body", completion.text)
            streamed = httpx.post(
                f"{url}/v1/chat/completions", headers=AUTH, timeout=60,
                json={"model": "coder", "stream": True, "messages": [{"role": "user", "content": "again"}]},
            )  # fmt: skip
            assert "invalid x-api-key" in streamed.text, streamed.text
            _clean("the streamed error", streamed.text)
            events = _Events(f"{url}/v1/sessions/agent:coder/events")
            assert events.connected.wait(30)
            sent = httpx.post(
                f"{url}/v1/agents/coder/messages", headers=AUTH, timeout=30,
                json={"content": "to the chat", "deliver": "tg/bot:chat:1001"},
            )  # fmt: skip
            assert sent.status_code == 202, sent.text
            assert events.done.wait(60), events.lines
            sse = "\n".join(events.lines)
            assert "invalid x-api-key" in sse
            _clean("the SSE stream_error", sse)
            deadline = time.monotonic() + 60
            while not any("Response interrupted" in m.text for m in list(tg.messages)):
                assert time.monotonic() < deadline, "the chat never heard of the failure"
                time.sleep(0.05)
            for message in list(tg.messages):
                _clean("a Telegram message", message.text)
            queue = httpx.get(f"{url}/v1/agents/coder/queue?include_finished=true", headers=AUTH, timeout=30)
            assert "invalid x-api-key" in queue.text
            _clean("the queue's turn_error", queue.text)
            for path in ("history", "export"):
                answer = httpx.get(f"{url}/v1/sessions/agent:coder/{path}", headers=AUTH, timeout=30)
                assert answer.status_code == 200 and "invalid x-api-key" in answer.text, (path, answer.text)
                _clean(f"/{path}", answer.text)
            stderr = _stop(process)
        _clean("the server's stderr", stderr)
    stored = b"".join(p.read_bytes() for p in isolated_env.glob("agents.db*"))
    assert b"invalid x-api-key" in stored
    for secret in SECRETS:
        assert secret.encode() not in stored, "a secret is stored in the ledger"
