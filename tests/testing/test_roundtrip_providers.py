"""Round trips: nexus.llm providers against the fake server, compared with the scripted model on the same script.

The fake server and the scripted model must agree on what a step looks like to code under test,
whichever of the two a test uses; these tests pin that down through the real provider adapters.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import pytest

from nexus.llm import AssistantMessage, Context, Model, StreamOptions, UserMessage, complete
from nexus.llm.errors import is_context_overflow
from nexus.testing import FakeProviderServer, ScriptedModel
from nexus.testing.steps import (
    Step,
    cut,
    html_error,
    http_error,
    malformed,
    overflow,
    reply,
    stall,
    stream_error,
    text,
    thinking,
    tool_call,
)

APIS = [
    pytest.param(
        "openai-completions",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("nexus.llm.providers.openai_completions") is None,
            reason="openai_completions provider not present yet",
        ),
    ),
    pytest.param(
        "anthropic-messages",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("nexus.llm.providers.anthropic") is None,
            reason="anthropic provider not present yet",
        ),
    ),
]


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as fake:
        yield fake


def model_for(api: str, fake: FakeProviderServer) -> Model:
    if api == "anthropic-messages":
        return Model(id="claude-fake", provider="anthropic", api=api, base_url=fake.anthropic_base_url)
    return Model(id="gpt-fake", provider="openai", api=api, base_url=fake.openai_base_url)


async def both(
    api: str, fake: FakeProviderServer, step: Step, options: StreamOptions | None = None
) -> tuple[AssistantMessage, AssistantMessage]:
    """The final message from the real adapter via the server, and from the scripted model."""
    fake.script(step)
    context = Context(system_prompt="sys", messages=[UserMessage("hello")])
    opts = options or StreamOptions()
    opts.api_key = "sk-test"
    over_http = await complete(model_for(api, fake), context, opts)
    scripted = ScriptedModel([step], api=api)
    in_process = await complete_scripted(scripted, context, opts)
    return over_http, in_process


async def complete_scripted(model: ScriptedModel, context: Context, options: StreamOptions) -> AssistantMessage:
    async for event in model.stream(model.model, context, options):
        if event.type == "done":
            return event.message
        if event.type == "error":
            return event.error
    raise AssertionError("scripted stream ended without done/error")


@pytest.mark.parametrize("api", APIS)
async def test_text_thinking_and_tool_call_agree(api: str, server: FakeProviderServer) -> None:
    step = reply(thinking("weighing it"), text("I will read"), tool_call("read", {"path": "a.txt"}, id="call_1"))
    http, scripted = await both(api, server, step)
    assert http.stop_reason == scripted.stop_reason == "tool_use"
    assert http.text == scripted.text == "I will read"
    assert [(c.id, c.name, c.arguments) for c in http.tool_calls] == [("call_1", "read", {"path": "a.txt"})]
    assert [(c.id, c.name, c.arguments) for c in scripted.tool_calls] == [("call_1", "read", {"path": "a.txt"})]
    assert http.usage.output > 0 and scripted.usage.output > 0
    sent = server.last_request
    assert sent.body is not None and sent.body.get("stream") is True


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("step", "kind"),
    [
        (http_error(429, retry_after=3), "rate_limit"),
        (http_error(401, "token expired"), "auth"),
        (http_error(529), "overloaded"),
        (http_error(403), "auth"),
        (http_error(401), "auth_permanent"),  # the providers' usual "invalid key" text
        (http_error(500), "timeout"),
        (html_error(502), "timeout"),
        (overflow(), "context_overflow"),
        (overflow(style="llama.cpp"), "context_overflow"),
    ],
)
async def test_http_failures_classify_the_same(api: str, server: FakeProviderServer, step: Step, kind: str) -> None:
    http, scripted = await both(api, server, step)
    assert http.stop_reason == scripted.stop_reason == "error"
    assert http.error_kind == scripted.error_kind == kind
    assert http.error_message == scripted.error_message
    assert http.retry_after == scripted.retry_after
    assert is_context_overflow(http) == is_context_overflow(scripted) == (kind == "context_overflow")


@pytest.mark.parametrize("api", APIS)
async def test_cut_stream_is_an_error_with_partial_text(api: str, server: FakeProviderServer) -> None:
    http, scripted = await both(api, server, cut(after_chunks=4, of=text("some words and then nothing")))
    assert http.stop_reason == scripted.stop_reason == "error"
    assert http.error_kind == scripted.error_kind == "network"
    assert http.text and "some words and then nothing".startswith(http.text)
    assert scripted.text and "some words and then nothing".startswith(scripted.text)


@pytest.mark.parametrize("api", APIS)
async def test_stall_longer_than_timeout_is_a_timeout(api: str, server: FakeProviderServer) -> None:
    http, scripted = await both(api, server, stall(after_chunks=3, seconds=30), StreamOptions(timeout=0.3))
    assert http.error_kind == scripted.error_kind == "timeout"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "step",
    [
        malformed(after_chunks=3, data="{not json"),
        stream_error(after_chunks=3, status=529),
        stream_error(after_chunks=3, status=429, message="Rate limit hit, retry in 4s"),
    ],
)
async def test_stream_failures_agree(api: str, server: FakeProviderServer, step: Step) -> None:
    http, scripted = await both(api, server, step)
    assert http.stop_reason == scripted.stop_reason == "error"
    assert (http.error_kind, http.error_message, http.retry_after) == (
        scripted.error_kind,
        scripted.error_message,
        scripted.retry_after,
    )
