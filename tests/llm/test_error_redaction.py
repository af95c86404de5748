"""A provider's error text never carries a credential out of the provider layer (issue 20, item 2).

Real loopback HTTP to ``FakeProviderServer``: providers that quote the refused key in a 401,
in an in-stream error, or a key nobody configured; each error message must keep its meaning
and lose the key, whichever wire API answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus.llm import Context, Model, StreamOptions, UserMessage, complete
from nexus.llm.redact import REDACTED, add_secrets, redact
from nexus.testing import FakeProviderServer, steps

CTX = Context(messages=[UserMessage("hello")])
KEY = "sk-ant-api03-Zq7rX2vLk9Pp4Ww1Tt8Yy6Uu3Ii5Oo0Aa_redaction-test"
OTHER = "sk-proj-9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee"


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as srv:
        yield srv


def _models(server: FakeProviderServer) -> list[Model]:
    """The wire APIs whose scripted errors the fake server speaks (``/v1/responses`` serves only replays)."""
    return [
        Model(id="m", provider="acme", api="openai-completions", base_url=server.openai_base_url),
        Model(id="m", provider="acme", api="anthropic-messages", base_url=server.anthropic_base_url),
    ]


async def test_a_401_that_quotes_the_refused_key_is_redacted_on_every_api(server: FakeProviderServer) -> None:
    for model in _models(server):
        server.script(steps.http_error(401, f"invalid x-api-key: {KEY} (also tried {OTHER})"))
        message = await complete(model, CTX, StreamOptions(api_key=KEY, timeout=5))
        assert message.stop_reason == "error" and message.error_kind == "auth_permanent", model.api
        error = message.error_message or ""
        assert KEY not in error and OTHER not in error, (model.api, error)
        assert "invalid x-api-key" in error and REDACTED in error  # the reason stays readable


async def test_an_error_inside_a_started_stream_is_redacted(server: FakeProviderServer) -> None:
    for model in _models(server):
        server.script(steps.stream_error(after_chunks=2, status=500, message=f"upstream refused Bearer {KEY}"))
        message = await complete(model, CTX, StreamOptions(api_key=KEY, timeout=5))
        assert message.stop_reason == "error", model.api
        assert KEY not in (message.error_message or "") and "Bearer [redacted]" in (message.error_message or "")


async def test_credentials_in_configured_headers_and_registered_ones_are_cut(server: FakeProviderServer) -> None:
    """A key sent in a config ``headers`` entry, and a server token the process registered, have no vendor shape."""
    header_secret = "plain-header-credential-0042"
    token = "nexus-server-token-000111"
    add_secrets([token])
    model = _models(server)[0]
    server.script(steps.http_error(403, f"gateway says: header {header_secret} and {token} are not allowed"))
    options = StreamOptions(api_key="k", headers={"x-gateway-auth": header_secret}, timeout=5)
    message = await complete(model, CTX, options)
    error = message.error_message or ""
    assert header_secret not in error and token not in error and error.startswith("403 ")


def test_key_shapes_go_and_ordinary_words_stay() -> None:
    cases = {
        f"Incorrect API key provided: {OTHER}.": f"Incorrect API key provided: {REDACTED}.",
        "Authorization: Bearer abcdef0123456789": f"Authorization: Bearer {REDACTED}",
        "GET https://g.test/v1?key=AIzaSyA0123456789abcdefghijklmnopqrstu&alt=sse": (
            f"GET https://g.test/v1?key={REDACTED}&alt=sse"
        ),
        "bot 123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0 is unknown": f"bot {REDACTED} is unknown",
        "api_key: abc123456789": f"api_key: {REDACTED}",
    }
    for text, expected in cases.items():
        assert redact(text) == expected
    for kept in (
        "use Bearer authentication",
        "api key: missing",
        "Incorrect API key provided: sk-proj-****abcd",  # already masked by the provider
        "This model's maximum context length is 128000 tokens; max_tokens=4096",
    ):
        assert redact(kept) == kept


PLAIN_KEY = "gateway/credential+with=signs/0123456789abcdef"
"""A configured key of no vendor shape, with the characters JSON and URLs escape."""


async def test_a_key_cut_by_the_length_limit_of_an_error_text_leaves_no_part_of_it(server: FakeProviderServer) -> None:
    """The body's excerpt ends inside a key: the redactor must see the body whole, before it is cut."""
    for model in _models(server):
        for key, options in ((PLAIN_KEY, StreamOptions(api_key=PLAIN_KEY, timeout=5)), (OTHER, None)):
            pad = "x" * (490 - len(" refused: "))  # the excerpt keeps 500 characters: the key straddles the cut
            server.script(steps.http_error(401, body=f"{pad} refused: {key}"))
            message = await complete(model, CTX, options or StreamOptions(api_key="k", timeout=5))
            error = message.error_message or ""
            assert "refused" in error and key[:8] not in error, (model.api, error[-80:])
        pad = "y" * 180  # a broken stream line is quoted by its first 200 characters
        server.script(steps.malformed(after_chunks=1, data=f'{{"broken": "{pad} {OTHER}'))
        message = await complete(model, CTX, StreamOptions(api_key="k", timeout=5))
        error = message.error_message or ""
        assert "malformed SSE data" in error and OTHER[:8] not in error, (model.api, error[-80:])


async def test_a_key_escaped_for_json_or_encoded_for_a_url_is_cut(server: FakeProviderServer) -> None:
    """A provider that echoes the key inside raw JSON (``\\/``) or a URL (``%2F``) still says nothing of it."""
    from urllib.parse import quote, quote_plus

    model = _models(server)[0]
    escaped = PLAIN_KEY.replace("/", "\\/")
    for body in (
        f'{{"error": {{"message": {{"detail": "key {escaped} refused"}}}}}}',  # a shape the excerpt shows raw
        f"refused https://gw.test/v1?auth={quote(PLAIN_KEY, safe='')}&x=1",
        f"refused form auth={quote_plus(PLAIN_KEY)}",
    ):
        server.script(steps.http_error(401, body=body))
        message = await complete(model, CTX, StreamOptions(api_key=PLAIN_KEY, timeout=5))
        error = message.error_message or ""
        assert "refused" in error and REDACTED in error, error
        assert "credential" not in error and "0123456789abcdef" not in error, error
