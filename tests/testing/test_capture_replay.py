"""Capture (``NEXUS_CAPTURE_DIR``) and replay (``steps.replay``): a provider exchange saved to a file, keys
redacted, and served back byte for byte so that it decodes to the same message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nexus.llm import Context, Model, StreamOptions, UserMessage, complete
from nexus.llm.capture import ENV_VAR, CaptureRecord, load_capture, set_capture_dir
from nexus.llm.events import ErrorEvent
from nexus.llm.types import AssistantMessage, Usage
from nexus.testing import FakeProviderServer, ScriptedModel
from nexus.testing.steps import (
    ScriptError,
    Step,
    cut,
    http_error,
    replay,
    reply,
    steps_from_json,
    text,
    thinking,
    tool_call,
)

SECRET = "sk-proj-CaptureTestSecret0123456789"
CTX = Context(system_prompt="Be brief.", messages=[UserMessage("What is in notes.txt?")])
APIS = ["openai-completions", "anthropic-messages"]


def _model(api: str, server: FakeProviderServer) -> Model:
    base = server.anthropic_base_url if api == "anthropic-messages" else server.openai_base_url
    return Model(id="m", provider="captest", api=api, base_url=base, input_price=1.0, output_price=2.0)


async def _call(api: str, *steps: Step, key: str = SECRET) -> AssistantMessage:
    async with FakeProviderServer(*steps) as server:
        return await complete(_model(api, server), CTX, StreamOptions(api_key=key))


def _captures(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.capture"))


def _same(a: AssistantMessage, b: AssistantMessage) -> None:
    """Same message, but for the loopback port each server got (it shows in connection errors)."""
    assert (a.content, a.stop_reason, a.error_kind, a.retry_after) == (
        b.content,
        b.stop_reason,
        b.error_kind,
        b.retry_after,
    )
    assert _portless(a.error_message) == _portless(b.error_message)
    assert a.usage == b.usage


def _portless(text: str | None) -> str | None:
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1", text) if text is not None else None


@pytest.fixture
def capture_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "captures"
    monkeypatch.setenv(ENV_VAR, str(directory))
    return directory


@pytest.mark.parametrize("api", APIS)
async def test_a_captured_stream_replays_to_the_same_message(api: str, capture_dir: Path) -> None:
    script = reply(thinking("check the file"), text("Reading it."), tool_call("read", {"path": "notes.txt"}, id="c1"))
    original = await _call(api, script)
    (path,) = _captures(capture_dir)
    record = load_capture(path)
    assert record.status == 200 and record.method == "POST" and record.error is None
    assert record.url.endswith("/chat/completions" if api == "openai-completions" else "/v1/messages")
    assert isinstance(record.request, dict) and record.request["stream"] is True
    assert record.content_type == "text/event-stream"
    assert path.stat().st_mode & 0o077 == 0  # it holds the prompt: the owner's only
    for pieces in (None, 37, 1):
        _same(await _call(api, replay(path, pieces)), original)


@pytest.mark.parametrize("api", APIS)
async def test_no_key_appears_anywhere_in_a_capture(
    api: str, capture_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_key = "sk-env-OtherSecretValue-9876543210"
    monkeypatch.setenv("CAPTEST_API_KEY", env_key)  # a key in the environment, echoed back by the provider below
    echoed = http_error(401, f"Incorrect API key provided: {SECRET} (also tried {env_key})")
    await _call(api, reply(text(f"the prompt mentioned {env_key}")), echoed)
    await _call(api, echoed)
    files = _captures(capture_dir)
    assert len(files) == 2
    for path in files:
        data = path.read_bytes()
        assert SECRET.encode() not in data and env_key.encode() not in data
        assert SECRET[10:30].encode() not in data  # not even a fragment
        headers = load_capture(path).request_headers
        secret_header = "authorization" if api == "openai-completions" else "x-api-key"
        assert headers[secret_header] == "[redacted]"
    assert b"Incorrect API key provided: [redacted]" in files[1].read_bytes()


async def test_an_http_error_replays_with_its_status_and_headers(capture_dir: Path) -> None:
    original = await _call("openai-completions", http_error(429, "slow down", retry_after=3))
    assert original.error_kind == "rate_limit" and original.retry_after == 3.0
    (path,) = _captures(capture_dir)
    record = load_capture(path)
    assert record.status == 429 and record.response_headers["retry-after"] == "3"
    _same(await _call("openai-completions", replay(path)), original)


async def test_a_cut_stream_is_captured_as_cut_and_replays_cut(capture_dir: Path) -> None:
    original = await _call("anthropic-messages", cut(after_chunks=5, of=text("words that never finish, " * 4)))
    assert original.stop_reason == "error" and original.error_kind == "network" and original.text
    (path,) = _captures(capture_dir)
    assert load_capture(path).error is not None
    for pieces in (None, 7):
        _same(await _call("anthropic-messages", replay(path, pieces)), original)


async def test_capture_stops_when_the_variable_is_unset(capture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await _call("openai-completions", text("captured"))
    monkeypatch.delenv(ENV_VAR)
    await _call("openai-completions", text("not captured"))
    (path,) = _captures(capture_dir)
    assert b"not captured" not in path.read_bytes() and b"captured" in path.read_bytes()


async def test_set_capture_dir_and_the_variable_winning_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    configured, from_env = tmp_path / "configured", tmp_path / "env"
    set_capture_dir(configured)
    try:
        await _call("openai-completions", text("one"))
        monkeypatch.setenv(ENV_VAR, str(from_env))
        await _call("openai-completions", text("two"))
    finally:
        set_capture_dir(None)
    assert len(_captures(configured)) == 1 and len(_captures(from_env)) == 1


async def test_an_unwritable_capture_dir_never_breaks_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(blocker / "captures"))
    message = await _call("openai-completions", text("still answered"))
    assert message.stop_reason == "stop" and message.text == "still answered"


async def test_a_capture_written_by_hand_is_served_as_written(tmp_path: Path) -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hand"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    record = CaptureRecord(
        "POST", "https://example.test/v1/chat/completions", 200, {"content-type": "text/event-stream"}
    )
    record.body = body
    path = tmp_path / "hand.capture"
    path.write_bytes(record.to_bytes())
    async with FakeProviderServer(replay(path, 5)) as server:
        import httpx

        async with httpx.AsyncClient() as client:
            response = await client.post(server.openai_base_url + "/chat/completions", json={"stream": True})
    assert response.status_code == 200 and response.content == body
    assert response.headers["content-type"] == "text/event-stream"


def test_a_file_that_is_not_a_capture_fails_the_script_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(ScriptError, match=r"notes\.txt is not a capture"):
        replay(path)
    with pytest.raises(ScriptError, match="cannot read capture"):
        replay(tmp_path / "missing.capture")
    with pytest.raises(ScriptError, match="piece_bytes"):
        steps_from_json([{"replay": str(path), "piece_bytes": 0}])


def test_a_json_script_can_replay_a_capture(tmp_path: Path) -> None:
    record = CaptureRecord("POST", "https://example.test/v1/messages", 200, {"content-type": "text/event-stream"})
    path = tmp_path / "x.capture"
    path.write_bytes(record.to_bytes())
    (step,) = steps_from_json(json.loads(json.dumps([{"replay": str(path), "piece_bytes": 37}])))
    assert step == replay(path, 37)


async def test_the_scripted_model_says_a_replay_needs_the_server(tmp_path: Path) -> None:
    path = tmp_path / "x.capture"
    path.write_bytes(CaptureRecord("POST", "https://example.test/v1/messages", 200).to_bytes())
    scripted = ScriptedModel([replay(path)])
    events = [e async for e in scripted.stream(scripted.model, CTX)]
    final = events[-1]
    assert isinstance(final, ErrorEvent) and "needs FakeProviderServer" in (final.error.error_message or "")


async def test_usage_survives_the_round_trip(capture_dir: Path) -> None:
    script = reply(text("priced"), usage=Usage(input=120, output=30, cache_read=40))
    original = await _call("openai-completions", script)
    assert (original.usage.input, original.usage.output, original.usage.cache_read) == (120, 30, 40)
    (path,) = _captures(capture_dir)
    again = await _call("openai-completions", replay(path, 1))
    assert again.usage == original.usage and again.usage.cost.total > 0
