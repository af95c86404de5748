"""A gzip-encoded provider response is captured decoded (readable, and still replayable byte for byte)."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest

from nexus.llm import Context, Model, StreamOptions, UserMessage, _http, complete
from nexus.llm.capture import ENV_VAR, load_capture
from nexus.testing import FakeProviderServer
from nexus.testing.steps import replay

from ._helpers import MockHTTP, oa_chunk, oa_usage, openai_sse

CTX = Context(messages=[UserMessage("hi")])


def _captures(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.capture"))


async def test_a_gzip_body_is_stored_decoded(
    mock_http: MockHTTP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    body = openai_sse([oa_chunk({"content": "squeezed"}), oa_chunk({}, "stop"), oa_usage(5, 2)])
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    mock_http.add(httpx.Response(200, content=gzip.compress(body), headers=headers))
    model = Model(id="m", provider="openai", api="openai-completions", base_url="https://api.openai.com/v1")
    original = await complete(model, CTX, StreamOptions(api_key="sk-test"))
    assert original.text == "squeezed"
    (path,) = _captures(tmp_path)
    record = load_capture(path)
    assert record.body == body
    assert "content-encoding" not in {k.lower() for k in record.response_headers}
    _http.use_transport(None)  # the replay goes over real loopback HTTP
    async with FakeProviderServer(replay(path, 11)) as server:
        again = await complete(
            Model(id="m", provider="openai", api="openai-completions", base_url=server.openai_base_url),
            CTX,
            StreamOptions(api_key="sk-test"),
        )
    assert (again.text, again.usage) == (original.text, original.usage)
