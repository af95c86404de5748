"""Base-URL precedence: options, then an explicit model base_url, then <PROVIDER>_BASE_URL, then the default.

Each level is checked for every HTTP wire API by making a real (mock-transport) call and
reading the URL the request went to.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nexus.errors import UnknownProviderError
from nexus.llm import (
    Context,
    Model,
    StreamOptions,
    UserMessage,
    complete,
    effective_base_url,
    get_model,
    resolve_base_url,
    stream,
)

from ._helpers import MockHTTP, anthropic_text_events, named_sse, oa_chunk, openai_sse

CTX = Context(messages=[UserMessage("hi")])
APIS = ("openai-completions", "openai-responses", "anthropic-messages")
ENV_URL = "https://env-proxy.example.test/v1"
MODEL_URL = "http://127.0.0.1:8080/v1"
OPTIONS_URL = "https://options.example.test/v1"


def _catalog_model(api: str) -> Model:
    if api == "anthropic-messages":
        return get_model("anthropic", "claude-sonnet-4-5")
    return replace(get_model("openai", "gpt-4o"), api=api)


def _env_var(api: str) -> str:
    return "ANTHROPIC_BASE_URL" if api == "anthropic-messages" else "OPENAI_BASE_URL"


def _endpoint(api: str, base: str) -> str:
    if api == "openai-completions":
        return f"{base}/chat/completions"
    if api == "openai-responses":
        return f"{base}/responses"
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def _ok_response(mock_http: MockHTTP, api: str) -> None:
    if api == "openai-completions":
        mock_http.sse(openai_sse([oa_chunk({"content": "ok"}), oa_chunk({}, "stop")]))
    elif api == "anthropic-messages":
        mock_http.sse(named_sse(anthropic_text_events(["ok"])))
    else:
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": {"id": "r1", "status": "in_progress"}}),
            ("response.output_item.added", {"output_index": 0, "item": {"type": "message", "id": "m1"}}),
            ("response.output_text.delta", {"output_index": 0, "content_index": 0, "delta": "ok"}),
            ("response.completed", {"response": {"id": "r1", "status": "completed"}}),
        ]
        mock_http.sse(named_sse((kind, {"type": kind, **data}) for kind, data in events))


async def _called_url(mock_http: MockHTTP, model: Model, options: StreamOptions) -> str:
    msg = await complete(model, CTX, options)
    assert msg.stop_reason == "stop", msg.error_message
    assert msg.content and getattr(msg.content[0], "text", None) == "ok"
    return str(mock_http.requests[-1].url)


@pytest.mark.parametrize("api", APIS)
async def test_provider_default_when_nothing_is_set(mock_http: MockHTTP, api: str) -> None:
    _ok_response(mock_http, api)
    model = _catalog_model(api)
    assert model.base_url == ""  # catalog entries leave it unset
    url = await _called_url(mock_http, model, StreamOptions(api_key="k"))
    default = "https://api.anthropic.com" if api == "anthropic-messages" else "https://api.openai.com/v1"
    assert url == _endpoint(api, default)


@pytest.mark.parametrize("api", APIS)
async def test_environment_beats_the_default(mock_http: MockHTTP, monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    monkeypatch.setenv(_env_var(api), ENV_URL + "/")
    _ok_response(mock_http, api)
    url = await _called_url(mock_http, _catalog_model(api), StreamOptions(api_key="k"))
    assert url == _endpoint(api, ENV_URL)


@pytest.mark.parametrize("api", APIS)
async def test_explicit_model_base_url_beats_the_environment(
    mock_http: MockHTTP, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    monkeypatch.setenv(_env_var(api), ENV_URL)
    _ok_response(mock_http, api)
    model = replace(_catalog_model(api), base_url=MODEL_URL)
    url = await _called_url(mock_http, model, StreamOptions())  # local URL: no key needed
    assert url == _endpoint(api, MODEL_URL)
    assert "authorization" not in mock_http.requests[-1].headers
    assert "x-api-key" not in mock_http.requests[-1].headers


@pytest.mark.parametrize("api", APIS)
async def test_options_base_url_beats_model_and_environment(
    mock_http: MockHTTP, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    monkeypatch.setenv(_env_var(api), ENV_URL)
    _ok_response(mock_http, api)
    model = replace(_catalog_model(api), base_url=MODEL_URL)
    url = await _called_url(mock_http, model, StreamOptions(api_key="k", base_url=OPTIONS_URL + "/"))
    assert url == _endpoint(api, OPTIONS_URL)


@pytest.mark.parametrize("api", APIS)
async def test_blank_values_count_as_unset(mock_http: MockHTTP, monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    monkeypatch.setenv(_env_var(api), "   ")
    _ok_response(mock_http, api)
    model = replace(_catalog_model(api), base_url=" ")
    url = await _called_url(mock_http, model, StreamOptions(api_key="k", base_url=""))
    default = "https://api.anthropic.com" if api == "anthropic-messages" else "https://api.openai.com/v1"
    assert url == _endpoint(api, default)


def test_effective_base_url_shows_where_requests_go(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = get_model("openai", "gpt-4o")
    assert effective_base_url(catalog) == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", ENV_URL + "/")
    assert effective_base_url(catalog) == ENV_URL
    pinned = replace(catalog, base_url=MODEL_URL + "/")
    assert effective_base_url(pinned) == MODEL_URL
    assert effective_base_url(pinned, StreamOptions(base_url=OPTIONS_URL)) == OPTIONS_URL
    assert effective_base_url(pinned, StreamOptions()) == MODEL_URL
    assert effective_base_url(get_model("mycorp", "brainy-1")) is None
    monkeypatch.setenv("MY_CORP_BASE_URL", "https://corp.example.test/v1")
    assert effective_base_url(get_model("my-corp", "brainy-1")) == "https://corp.example.test/v1"
    assert resolve_base_url("openai", MODEL_URL) == MODEL_URL


def test_unknown_models_of_known_providers_leave_base_url_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    future = get_model("anthropic", "claude-future-9")
    assert future.base_url == ""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", ENV_URL)
    assert effective_base_url(future) == ENV_URL


async def test_unknown_provider_uses_its_environment_variable(
    mock_http: MockHTTP, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYCORP_BASE_URL", "https://corp.example.test/v1")
    _ok_response(mock_http, "openai-completions")
    url = await _called_url(mock_http, get_model("mycorp", "brainy-1"), StreamOptions(api_key="k"))
    assert url == "https://corp.example.test/v1/chat/completions"


def test_unknown_provider_without_any_base_url_names_the_variable() -> None:
    with pytest.raises(UnknownProviderError, match="MYCORP_BASE_URL"):
        stream(get_model("mycorp", "brainy-1"), CTX)


async def test_provider_module_called_directly_reports_the_variable(mock_http: MockHTTP) -> None:
    from nexus.llm.providers import openai_completions

    events = [event async for event in openai_completions.stream(get_model("mycorp", "brainy-1"), CTX, None)]
    assert [event.type for event in events][-1] == "error"
    final = events[-1]
    assert final.type == "error"
    assert final.error.stop_reason == "error"
    assert "MYCORP_BASE_URL" in (final.error.error_message or "")
    assert mock_http.requests == []
