"""The OpenAI-compatible facade, driven by the official ``openai`` SDK against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from nexus.config._server_schema import ServerConfig
from nexus.ledger import NewSession
from nexus.ledger._sql_db import run_inline
from nexus.server._schemas import ChatCompletion, ModelList
from nexus.testing import ScriptedModel
from nexus.testing.steps import reply, stall, text, tool_call

from .broker_app import listening, live_app, wait_until

openai = pytest.importorskip("openai", reason="the facade is tested with the official openai SDK (dev extra)")

SLOW_HEAD = (
    b"POST /v1/agents/coder/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    b"content-length: 100\r\n\r\n{"
)
"""A request whose body never arrives (slow-loris): it passes every header check and waits for its body."""


def _user_texts(live: object, session: str) -> list[str]:
    ledger = live.ledger  # type: ignore[attr-defined]
    return [
        str(stored.message.content).rsplit("[/Event context]\n\n", 1)[-1]  # the engine's time preamble
        for turn in run_inline(ledger.turns.path(session))
        for stored in run_inline(ledger.turns.messages(turn.id))
        if stored.role == "user"
    ]


async def test_models_and_a_plain_completion_with_usage(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("Hello, I am the coder.")])) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            models = [model.id async for model in client.models.list()]
            assert models == ["coder", "lead"]
            completion = await client.chat.completions.create(
                model="coder", messages=[{"role": "user", "content": "who are you?"}]
            )
            await client.close()
            async with httpx.AsyncClient(base_url=url) as http:  # the bodies are the ones /openapi.json documents
                ModelList.model_validate((await http.get("/v1/models")).json())
        ChatCompletion.model_validate(completion.model_dump())
        assert completion.choices[0].message.content == "Hello, I am the coder."
        assert completion.choices[0].finish_reason == "stop" and completion.model == "coder"
        (turn,) = await live.ledger.turns.path("agent:coder")
        assert completion.usage is not None and completion.usage.prompt_tokens == turn.input_tokens > 0
        assert completion.usage.completion_tokens == turn.output_tokens > 0
        assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
        (item,) = live.store.items(agent_id="coder")
        assert item.status == "delivered" and item.turn_id == turn.id and item.message_id == completion.id


async def test_streamed_completion_arrives_in_chunks_then_usage_and_done(tmp_path: Path) -> None:
    reply = "The quick brown fox jumps over the lazy dog."
    async with live_app(tmp_path, ScriptedModel([text(reply)], chunk_chars=4)) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            stream = await client.chat.completions.create(
                model="coder", messages=[{"role": "user", "content": "a sentence please"}], stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            chunks = [chunk async for chunk in stream]
            await client.close()
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert "".join(pieces) == reply and len(pieces) > 5
        assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["stop"]
        assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


async def test_a_streamed_turn_with_tool_calls_keeps_the_model_calls_texts_apart(tmp_path: Path) -> None:
    """Two model calls' texts, one before a tool call and one after, streamed as "Let me look.Found the files."
    (a trial); `nexus run` starts the second on a new line, the stream now keeps them a blank line apart."""
    scripted = ScriptedModel([reply(text("Let me look."), tool_call("ls", {})), text("Found the files.")])
    async with live_app(tmp_path, scripted) as live, listening(live.app) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = await client.chat.completions.create(
            model="coder", messages=[{"role": "user", "content": "what is here?"}], stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await client.close()
    assert streamed == "Let me look.\n\nFound the files."


async def test_only_the_new_messages_enter_the_session_and_user_or_header_choose_one(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("first answer"), text("second answer"), text("alice's"), text("picked")])
    async with live_app(tmp_path, scripted) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            history: list[dict[str, str]] = [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "question one"},
            ]
            first = await client.chat.completions.create(model="coder", messages=history)
            history += [
                {"role": "assistant", "content": first.choices[0].message.content or ""},
                {"role": "user", "content": "question two"},
            ]
            await client.chat.completions.create(model="coder", messages=history)
            await client.chat.completions.create(
                model="coder", messages=[{"role": "user", "content": "from alice"}], user="alice"
            )
            raw = await client.chat.completions.with_raw_response.create(
                model="coder", messages=[{"role": "user", "content": "chosen"}],
                extra_headers={"X-Nexus-Session": "project-x"},
            )  # fmt: skip
            await client.close()
        assert _user_texts(live, "agent:coder") == ["question one", "question two"]
        assert _user_texts(live, "agent:coder:user:alice") == ["from alice"]
        assert _user_texts(live, "project-x") == ["chosen"]
        assert raw.headers["x-nexus-session"] == "project-x" and raw.parse().choices[0].message.content == "picked"


async def test_sdk_errors_unknown_model_bad_session_and_wrong_token(tmp_path: Path) -> None:
    config = ServerConfig(tokens=["s3cret"])
    async with live_app(tmp_path, ScriptedModel([]), config) as live:
        async with listening(live.app) as url:
            good = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="s3cret", max_retries=0)
            with pytest.raises(openai.NotFoundError):
                await good.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])
            with pytest.raises(openai.BadRequestError):
                await good.chat.completions.create(
                    model="coder", messages=[{"role": "user", "content": "hi"}],
                    extra_headers={"X-Nexus-Session": "../../etc"},
                )  # fmt: skip
            with pytest.raises(openai.BadRequestError):  # nothing new after the last assistant message
                await good.chat.completions.create(
                    model="coder",
                    messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                )
            with pytest.raises(openai.BadRequestError) as empty:  # a field's fault is 400 naming it, as OpenAI's
                await good.chat.completions.create(model="coder", messages=[])
            assert empty.value.param == "messages"
            bad = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0)
            with pytest.raises(openai.AuthenticationError):
                await bad.models.list()
            await good.close()
            await bad.close()
        assert live.store.items() == [] and await live.ledger.turns.path("agent:coder") == []


async def test_a_client_that_leaves_mid_stream_does_not_stop_the_turn_or_the_server(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("a fairly long answer " * 20), text("still serving")], chunk_chars=3,
                             tokens_per_second=400)  # fmt: skip
    async with live_app(tmp_path, scripted) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
            body = {"model": "coder", "stream": True, "messages": [{"role": "user", "content": "talk"}]}
            async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if '"content":"' in line and '"content":""' not in line:
                        break  # the first token arrived: hang up
            await wait_until(
                lambda: [t.status for t in run_inline(live.ledger.turns.path("agent:coder"))] == ["completed"]
            )
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            after = await client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "ok?"}])
            await client.close()
        assert after.choices[0].message.content == "still serving"


async def test_many_slow_clients_do_not_block_the_server(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("fast")])
    async with live_app(tmp_path, scripted) as live:
        async with listening(live.app) as url:
            port = int(url.rsplit(":", 1)[1])
            slow = []
            for _ in range(200):  # half-sent requests that never finish (slowloris)
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(SLOW_HEAD)
                slow.append(writer)
            await asyncio.gather(*(w.drain() for w in slow))
            async with httpx.AsyncClient(base_url=url, timeout=10) as http:
                health = await http.get("/v1/health")
                sent = await http.post("/v1/agents/lead/messages", json={"content": "still there?"})
            for writer in slow:
                writer.close()
            assert health.status_code == 200 and sent.status_code == 202
            await live.broker.wait_for_idle("lead", 20_000)
        assert live.store.get_item(sent.json()["queue_item_id"]).status == "delivered"  # type: ignore[union-attr]
        assert [i.agent_id for i in live.store.items()] == ["lead"]  # the half-sent requests stored nothing


def test_new_prompt_takes_the_user_messages_after_the_last_assistant_message() -> None:
    from nexus.server._errors import ApiError
    from nexus.server._openai import ChatMessage, choose_session, new_prompt

    def msgs(*pairs: tuple[str, object]) -> list[ChatMessage]:
        return [ChatMessage.model_validate({"role": role, "content": content}) for role, content in pairs]

    conversation = msgs(("system", "rules"), ("user", "old"), ("assistant", "reply"), ("user", "one"),
                        ("tool", "ignored"), ("user", [{"type": "text", "text": "two"}]))  # fmt: skip
    assert new_prompt(conversation) == "one\n\ntwo"
    for bad in (msgs(("user", "q"), ("assistant", "a")), msgs(("user", [{"type": "image_url", "image_url": {}}]))):
        with pytest.raises(ApiError) as refused:
            new_prompt(bad)
        assert refused.value.status == 400
    assert choose_session("agent:coder", None, None) == "agent:coder"
    assert choose_session("agent:coder", None, "alice") == "agent:coder:user:alice"
    assert choose_session("agent:coder", "mine", "alice") == "mine"
    for header, user in (("../x", None), ("a b", None), (None, "al/ice")):
        with pytest.raises(ApiError):
            choose_session("agent:coder", header, user)


async def test_a_turn_that_cannot_run_is_a_502_and_its_message_is_failed(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([])) as live:
        async with listening(live.app) as url:
            async with httpx.AsyncClient(base_url=url) as http:
                made = await http.post("/v1/agents", json={"id": "ghost", "model": "local/no-such-model"})
                assert made.status_code == 201
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            with pytest.raises(openai.APIStatusError) as failed:
                await client.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "hi"}])
            await client.close()
        assert failed.value.status_code == 502 and "no-such-model" in failed.value.message
        (item,) = live.store.items(agent_id="ghost")
        assert item.status == "failed" and "no-such-model" in (item.error or "")


async def test_another_agents_session_is_refused_and_nothing_is_written_there(tmp_path: Path) -> None:
    """``X-Nexus-Session: agent:lead`` with ``model=coder`` wrote a coder turn into lead's session, past its queue."""
    async with live_app(tmp_path, ScriptedModel([text("coder here")])) as live:
        await live.ledger.sessions.add_alias("lead-alias", "agent:lead")
        await live.ledger.sessions.create(NewSession("lead~dm~telegram~42"))  # lead's per-sender session of a chat
        await live.ledger.sessions.add_alias("lead-chat", "lead~dm~telegram~42")
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            hi = [{"role": "user", "content": "hi"}]
            for session in ("agent:lead", "agent:lead:user:bob", "lead-alias", "lead-chat"):
                with pytest.raises(openai.ConflictError) as refused:
                    await client.chat.completions.create(
                        model="coder", messages=hi, extra_headers={"X-Nexus-Session": session}
                    )
                assert "belongs to agent 'lead'" in refused.value.message, refused.value.message
            mine = await client.chat.completions.create(
                model="coder", messages=hi, extra_headers={"X-Nexus-Session": "project-x"}
            )
            assert mine.choices[0].message.content == "coder here"
            with pytest.raises(openai.ConflictError) as taken:  # a session the facade opened for coder is coder's
                await client.chat.completions.create(
                    model="lead", messages=hi, extra_headers={"X-Nexus-Session": "project-x"}
                )
            assert "belongs to agent 'coder'" in taken.value.message
            await client.close()
        assert (
            await live.ledger.turns.path("agent:lead") == []
            and await live.ledger.turns.path("lead~dm~telegram~42") == []
        )
        assert [s.label for s in await live.ledger.sessions.list()].count("agent:lead:user:bob") == 0
        assert len(await live.ledger.turns.path("project-x")) == 1 and live.store.items() == []


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
        ({"stop": ["\n"]}, "stop"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
async def test_an_option_the_facade_cannot_honour_is_refused_naming_it(
    tmp_path: Path, extra: dict[str, object], param: str
) -> None:
    """These were accepted and silently ignored: n=2 answered one choice, json_object answered prose."""
    async with live_app(tmp_path, ScriptedModel([])) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            with pytest.raises(openai.BadRequestError) as refused:
                await client.chat.completions.create(
                    model="coder", messages=[{"role": "user", "content": "hi"}], extra_body=extra
                )
            await client.close()
        assert refused.value.param == param and refused.value.code in ("unsupported_value", "unknown_parameter")
        assert param in refused.value.message
        assert live.store.items() == [] and await live.ledger.turns.path("agent:coder") == []


async def test_options_the_facade_can_honour_or_that_change_nothing_are_accepted(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("fine")])) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            completion = await client.chat.completions.create(
                model="coder", messages=[{"role": "user", "content": "hi"}], n=1, temperature=0.2, top_p=0.9,
                seed=7, response_format={"type": "text"}, logprobs=False, tool_choice="auto", stop=None,
                presence_penalty=0, frequency_penalty=0, parallel_tool_calls=True, metadata={"k": "v"},
            )  # fmt: skip
            await client.close()
        assert completion.choices[0].message.content == "fine" and len(await live.ledger.turns.path("agent:coder")) == 1


async def test_a_turn_aborted_on_request_is_a_409_not_a_reply(tmp_path: Path) -> None:
    """An aborted turn was answered 200 ``finish_reason: "stop"`` with its partial text, as if it had finished."""
    long = stall(after_chunks=4, seconds=30, then=text("the first words of a long answer"))
    scripted = ScriptedModel([long, long], chunk_chars=4)
    async with live_app(tmp_path, scripted) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            hi = [{"role": "user", "content": "a long job"}]

            async def abort_once_streaming() -> None:  # once the turn has begun (else its message would run again)
                await wait_until(lambda: run_inline(live.ledger.turns.open_turns()) != [])
                await wait_until(
                    lambda: (agent := live.broker.get_agent("coder")) is not None and agent.state == "streaming"
                )
                assert (await http.post("/v1/agents/coder/abort")).json()["aborted"] is True

            plain = asyncio.ensure_future(client.chat.completions.create(model="coder", messages=hi))
            await abort_once_streaming()
            with pytest.raises(openai.ConflictError) as refused:
                await plain
            stream = await client.chat.completions.create(model="coder", messages=hi, stream=True)
            aborter = asyncio.ensure_future(abort_once_streaming())
            with pytest.raises(openai.APIError) as ended:
                async for _ in stream:
                    pass
            await aborter
            await client.close()
        assert "the agent's turn was aborted: aborted on request" in refused.value.message, refused.value.message
        assert refused.value.response.headers["x-should-retry"] == "false"
        assert "aborted on request" in ended.value.message and not isinstance(ended.value, openai.APIStatusError)
        assert [t.status for t in run_inline(live.ledger.turns.path("agent:coder"))] == ["aborted", "aborted"]


async def test_a_message_dropped_with_its_queue_is_a_409_not_an_upstream_failure(tmp_path: Path) -> None:
    """A cleared queue's completion was answered 502 "the agent's turn failed", which the SDK resends."""
    long = stall(after_chunks=4, seconds=30, then=text("the first words of a long answer"))
    async with live_app(tmp_path, ScriptedModel([long], chunk_chars=4)) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            first = asyncio.ensure_future(
                client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "long"}])
            )
            await wait_until(lambda: run_inline(live.ledger.turns.open_turns()) != [])
            behind = asyncio.ensure_future(
                client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "next"}])
            )
            await wait_until(lambda: live.broker.get_queue_depth("coder") == 1)
            assert (await http.delete("/v1/agents/coder/queue")).json()["dropped"] == 1
            with pytest.raises(openai.ConflictError) as refused:
                await behind
            await http.post("/v1/agents/coder/abort")
            with pytest.raises(openai.ConflictError):
                await first
            await client.close()
        assert refused.value.body["type"] == "dropped" and "cleared" in refused.value.message, refused.value.body  # type: ignore[index]
        assert refused.value.response.headers["x-should-retry"] == "false"
