"""The chat facade's body checks: a field of the wrong type or value is 400 ``invalid_request`` naming it in
``param``, as OpenAI answers, and nothing is queued or run.

A trial found ``"stream": "yes"`` streaming (lax parsing took the string as true), ``"user": ""`` running in
the agent's own session though the error text says 1-64 characters, a too-long ``user`` answered 422 where a
bad one is 400, and a text part without ``text`` called "type 'text' is not supported".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from nexus.testing import ScriptedModel
from nexus.testing.steps import text

from .broker_app import listening, live_app

_HI = [{"role": "user", "content": "hi"}]

_FAULTS: list[tuple[dict[str, Any], str, str]] = [
    ({"stream": "yes"}, "stream", "invalid_type"),
    ({"stream": 1}, "stream", "invalid_type"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage", "invalid_type"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "invalid_value"),  # without stream: true
    ({"user": ""}, "user", "invalid_value"),
    ({"user": "u" * 65}, "user", "invalid_value"),
    ({"user": 5}, "user", "invalid_type"),
    ({"max_tokens": "5"}, "max_tokens", "invalid_type"),
    ({"max_tokens": 5.0}, "max_tokens", "invalid_type"),
    ({"max_completion_tokens": True}, "max_completion_tokens", "invalid_type"),
    ({"max_completion_tokens": 0}, "max_completion_tokens", "invalid_value"),
    ({"model": 5}, "model", "invalid_type"),
    ({"model": None}, "model", "invalid_type"),
    ({"messages": "hi"}, "messages", "invalid_type"),
    ({"messages": []}, "messages", "invalid_value"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role", "invalid_value"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "invalid_type"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text",
     "missing_required_parameter"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages[0].content[0].text",
     "invalid_type"),
    ({"messages": [*_HI, {"role": "user", "content": [{"type": "image_url"}]}]}, "messages[1].content[0].type",
     "invalid_value"),
    ({"temperature": "hot"}, "temperature", "invalid_type"),
    ({"seed": 1.5}, "seed", "invalid_type"),
    ({"top_p": True}, "top_p", "invalid_type"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_type"),
    ({"metadata": "k=v"}, "metadata", "invalid_type"),
]  # fmt: skip


async def test_a_field_of_the_wrong_type_or_value_is_a_400_naming_it_and_nothing_runs(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("ran")] * len(_FAULTS))) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            wrong = []
            for fault, param, code in _FAULTS:
                answer = await http.post("/v1/chat/completions", json={"model": "coder", "messages": _HI, **fault})
                error = answer.json().get("error") or {} if answer.status_code != 200 else {}
                got = (answer.status_code, error.get("type"), error.get("param"), error.get("code"))
                if got != (400, "invalid_request", param, code):
                    wrong.append((fault, got, answer.text[:200]))
        assert wrong == []
        assert live.store.items() == [] and await live.ledger.turns.path("agent:coder") == []
        assert sorted(s.label for s in await live.ledger.sessions.list()) == ["agent:coder", "agent:lead"]


async def test_the_right_types_still_run(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("plain"), text("streamed")])) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            plain = await http.post("/v1/chat/completions", json={
                "model": "coder", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "user": "alice", "max_tokens": 50, "temperature": 1, "seed": 3, "metadata": None, "store": False,
            })  # fmt: skip
            streamed = await http.post("/v1/chat/completions", json={
                "model": "coder", "messages": _HI, "stream": True, "stream_options": {"include_usage": True},
            })  # fmt: skip
        assert plain.status_code == 200 and plain.json()["choices"][0]["message"]["content"] == "plain", plain.text
        assert streamed.status_code == 200 and '"content":"streamed"' in streamed.text and "[DONE]" in streamed.text
        assert len(await live.ledger.turns.path("agent:coder:user:alice")) == 1
