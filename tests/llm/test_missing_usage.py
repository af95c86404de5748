"""Usage a server does not report is estimated (chars/4) and marked, never shown as 0 (issue 8, item 17).

llama.cpp's server sends no usage even with ``stream_options.include_usage``; the fake
provider server's ``usage=False`` does the same, over real loopback HTTP.
"""

from __future__ import annotations

import httpx

from nexus.llm import Context, Model, StreamOptions, UserMessage, complete
from nexus.llm.tokens import estimate_prompt_tokens
from nexus.llm.types import Usage
from nexus.testing import FakeProviderServer, steps

CTX = Context(system_prompt="You are terse.", messages=[UserMessage("Say hello to the whole team, please.")])
OPTS = StreamOptions(api_key="k", timeout=5)
REPLY = "Hello, whole team!"  # 18 characters: 5 tokens by chars/4, rounded up


def _openai(server: FakeProviderServer) -> Model:
    return Model(
        "llama", "llamacpp", "openai-completions", base_url=server.openai_base_url, input_price=1.0, output_price=2.0
    )


async def test_a_stream_without_usage_gets_an_estimate_marked_estimated() -> None:
    async with FakeProviderServer(steps.text(REPLY), usage=False) as server:
        message = await complete(_openai(server), CTX, OPTS)
        assert server.last_request.body is not None
        assert server.last_request.body["stream_options"] == {"include_usage": True}  # asked, and got none
    assert message.stop_reason == "stop" and message.text == REPLY
    usage = message.usage
    assert usage.estimated
    assert (usage.input, usage.output) == (estimate_prompt_tokens(CTX), 5)
    assert usage.input == -(-len("You are terse.") // 4) + -(-len("Say hello to the whole team, please.") // 4)
    assert usage.total == usage.input + usage.output
    assert usage.cost.total == usage.input * 1.0 / 1e6 + usage.output * 2.0 / 1e6


async def test_reported_usage_is_kept_as_measured() -> None:
    reported = Usage(input=321, output=7)
    async with FakeProviderServer(steps.reply(steps.text(REPLY), usage=reported)) as server:
        message = await complete(_openai(server), CTX, OPTS)
    assert not message.usage.estimated
    assert (message.usage.input, message.usage.output) == (321, 7)


async def test_a_reply_cut_mid_stream_estimates_what_it_cost() -> None:
    async with FakeProviderServer(steps.cut(after_chunks=3, of=steps.text(REPLY * 4)), usage=False) as server:
        message = await complete(_openai(server), CTX, OPTS)
    assert message.stop_reason == "error" and message.error_kind == "network" and message.text
    assert message.usage.estimated and message.usage.input > 0
    assert message.usage.output == -(-len(message.text) // 4)


async def test_a_request_refused_with_an_http_error_cost_nothing_and_is_not_estimated() -> None:
    async with FakeProviderServer(steps.http_error(401), usage=False) as server:
        message = await complete(_openai(server), CTX, OPTS)
    assert message.stop_reason == "error"
    assert message.usage == Usage()


async def test_fake_server_without_usage_leaves_it_out_of_plain_json_too() -> None:
    async with FakeProviderServer(steps.text(REPLY), usage=False) as server, httpx.AsyncClient() as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        answer = (await client.post(f"{server.openai_base_url}/chat/completions", json=body)).json()
    assert answer["choices"][0]["message"]["content"] == REPLY
    assert "usage" not in answer


def test_fake_server_without_usage_leaves_it_out_of_anthropics_wire_too() -> None:
    from nexus.testing import _wire_anthropic
    from nexus.testing.steps import text as reply_text

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    frames = b"".join(_wire_anthropic.stream_frames(reply_text("hello"), body, 4, "x", usage_reported=False))
    assert b"usage" not in frames and b"message_stop" in frames
    assert "usage" not in _wire_anthropic.message_json(reply_text("hello"), body, "x", usage_reported=False)
    assert b"usage" in b"".join(_wire_anthropic.stream_frames(reply_text("hello"), body, 4, "x"))
