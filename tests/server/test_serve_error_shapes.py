"""Errors read the same way at every door, over a real uvicorn on 127.0.0.1.

A trial found three exceptions: the OpenAI facade's 404 for an unknown model had no ``code``/``param`` (the SDK's
``e.code`` was ``None``; OpenAI answers ``model_not_found``), a refused CORS preflight was ``400`` plain text
``Disallowed CORS origin`` and an allowed one ``200`` with the text ``OK``, and errors answered by the checks in
front of the routes were spelled with spaces (``{"error": {"type": …``) while the routes' were compact.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from nexus.config._server_schema import ServerConfig
from nexus.testing import ScriptedModel

from .broker_app import listening, live_app

openai = pytest.importorskip("openai", reason="the facade is tested with the official openai SDK (dev extra)")

PAGE = "http://good.example"
HI = [{"role": "user", "content": "hi"}]


async def test_an_unknown_model_is_model_not_found_naming_param_model(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([])) as live, listening(live.app) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(model="nobody", messages=HI)
        await client.close()
        async with httpx.AsyncClient(base_url=url) as http:
            raw = await http.post("/v1/chat/completions", json={"model": "nobody", "messages": HI})
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    error = raw.json()["error"]
    assert raw.status_code == 404 and error["type"] == "model_not_found"
    assert (error["code"], error["param"]) == ("model_not_found", "model")


async def test_every_refusal_of_the_facade_carries_code_and_param(tmp_path: Path) -> None:
    """A 409 (another agent's session) and a streamed 502 name a ``code``; ``param`` is there, ``null`` when no
    request field is at fault (a refusal the library raised, 429 ``queue_full``: ``test_queue_full_new.py``)."""
    async with (
        live_app(tmp_path, ScriptedModel([])) as live,
        listening(live.app) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        made = await http.post("/v1/agents", json={"id": "ghost", "model": "local/no-such-model"})
        assert made.status_code == 201, made.text
        taken = await http.post(
            "/v1/chat/completions", json={"model": "coder", "messages": HI},
            headers={"x-nexus-session": "agent:lead"},
        )  # fmt: skip
        streamed = await http.post("/v1/chat/completions", json={"model": "ghost", "messages": HI, "stream": True})
    assert taken.status_code == 409 and taken.json()["error"] == {
        "type": "conflict", "message": taken.json()["error"]["message"], "param": None, "code": "conflict",
    }  # fmt: skip
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: {")]
    failed = json.loads(events[-1])["error"]
    assert (failed["type"], failed["code"], failed["param"]) == ("upstream_error", "upstream_error", None)


async def test_a_cors_preflight_is_204_or_a_403_in_the_error_shape(tmp_path: Path) -> None:
    async with (
        live_app(tmp_path, ScriptedModel([]), ServerConfig(tokens=["t0k"], cors_origins=[PAGE])) as live,
        listening(live.app) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        allowed = await http.options(
            "/v1/agents/coder/messages",
            headers={"origin": PAGE, "access-control-request-method": "POST",
                     "access-control-request-headers": "authorization, content-type"},
        )  # fmt: skip
        refused = await http.options(
            "/v1/agents/coder/messages",
            headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
        )
        odd_header = await http.options(
            "/v1/agents", headers={"origin": PAGE, "access-control-request-method": "POST",
                                   "access-control-request-headers": "x-custom"},
        )  # fmt: skip
    assert allowed.status_code == 204 and allowed.content == b"", allowed.content
    assert allowed.headers["access-control-allow-origin"] == PAGE
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/json"
    assert refused.json()["error"]["type"] == "forbidden" and "cors_origins" in refused.json()["error"]["message"]
    assert "access-control-allow-origin" not in refused.headers
    assert odd_header.status_code == 403 and "x-custom" in odd_header.json()["error"]["message"]


async def test_errors_of_the_checks_in_front_and_of_the_routes_are_spelled_alike(tmp_path: Path) -> None:
    async with (
        live_app(tmp_path, ScriptedModel([]), ServerConfig(tokens=["t0k"])) as live,
        listening(live.app) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        unauthorized = await http.get("/v1/agents")
        wrong_type = await http.post(
            "/v1/agents", content=b"x", headers={"authorization": "Bearer t0k", "content-type": "text/plain"}
        )
        missing = await http.get("/v1/agents/nobody", headers={"authorization": "Bearer t0k"})
    assert (unauthorized.status_code, wrong_type.status_code, missing.status_code) == (401, 415, 404)
    for answer in (unauthorized, wrong_type, missing):
        body = answer.json()
        assert answer.content == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(), answer.content


async def test_the_checks_in_front_of_the_facade_answer_with_a_code_too(tmp_path: Path) -> None:
    """A wrong key at the facade was 401 without ``code`` (OpenAI's is ``invalid_api_key``); a body that is not
    JSON, 415, had none either. An ``OPTIONS`` with no ``Origin`` is no preflight: 204 with ``Allow``, not a 401
    for want of a token."""
    config = ServerConfig(tokens=["t0k"], cors_origins=[PAGE])
    async with live_app(tmp_path, ScriptedModel([]), config) as live, listening(live.app) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            await client.chat.completions.create(model="coder", messages=HI)
        await client.close()
        async with httpx.AsyncClient(base_url=url) as http:
            form = await http.post(
                "/v1/chat/completions", content=b"a=1",
                headers={"authorization": "Bearer t0k", "content-type": "application/x-www-form-urlencoded"},
            )  # fmt: skip
            options = await http.options("/v1/agents", headers={"access-control-request-method": "POST"})
    assert refused.value.code == "invalid_api_key"
    assert form.status_code == 415 and form.json()["error"]["code"] == "unsupported_media_type"
    assert options.status_code == 204 and options.headers["allow"] == "GET, POST, OPTIONS"
