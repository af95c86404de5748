"""Chat completions in a session other than the agent's own (``X-Nexus-Session``, ``user``) are the broker's runs:
the agent's abort stops them, its state shows them, and ``max_concurrent`` counts them.

Driven by the official ``openai`` SDK against a real uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import httpx
import pytest

from nexus.ledger._sql_db import run_inline
from nexus.testing import ScriptedModel
from nexus.testing.steps import stall, text

from .broker_app import listening, live_app, wait_until

openai = pytest.importorskip("openai", reason="the facade is tested with the official openai SDK (dev extra)")


async def _until_streaming(http: httpx.AsyncClient, live: object) -> None:
    """Until a turn is open and ``GET /v1/agents/coder`` says ``streaming`` (what the web UI reads)."""
    ledger = live.ledger  # type: ignore[attr-defined]
    await wait_until(lambda: run_inline(ledger.turns.open_turns()) != [])
    deadline = asyncio.get_running_loop().time() + 20
    while (await http.get("/v1/agents/coder")).json()["state"] != "streaming":
        assert asyncio.get_running_loop().time() < deadline, "the agent never read streaming"
        await asyncio.sleep(0.02)


async def test_the_agents_abort_stops_a_completion_in_another_session(tmp_path: Path) -> None:
    """Such a turn ran beside the broker: the agent read ``idle`` while it streamed, ``abort`` (with or
    without ``?session=``) answered ``aborted: false`` and the turn went on to the end."""
    long = stall(after_chunks=4, seconds=30, then=text("the first words of a long answer"))
    scripted = ScriptedModel([long, long], chunk_chars=4)
    async with live_app(tmp_path, scripted) as live:
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            hi = [{"role": "user", "content": "a long job"}]
            named = asyncio.ensure_future(
                client.chat.completions.create(model="coder", messages=hi, extra_headers={"X-Nexus-Session": "proj-x"})
            )
            await _until_streaming(http, live)
            assert (await http.post("/v1/agents/coder/abort", params={"session": "proj-y"})).json()["aborted"] is False
            assert (await http.post("/v1/agents/coder/abort", params={"session": "proj-x"})).json()["aborted"] is True
            with pytest.raises(openai.ConflictError) as refused:
                await named
            stream = await client.chat.completions.create(model="coder", messages=hi, user="bob", stream=True)
            await _until_streaming(http, live)
            assert (await http.post("/v1/agents/coder/abort")).json()["aborted"] is True
            with pytest.raises(openai.APIError) as ended:
                async for _ in stream:
                    pass
            await client.close()
            assert (await http.get("/v1/agents/coder")).json()["state"] == "idle"
        assert "the agent's turn was aborted: aborted on request" in refused.value.message, refused.value.message
        assert "aborted on request" in ended.value.message
        for session in ("proj-x", "agent:coder:user:bob"):
            assert [t.status for t in run_inline(live.ledger.turns.path(session))] == ["aborted"], session


async def test_max_concurrent_counts_completions_in_other_sessions(tmp_path: Path) -> None:
    """With ``max_concurrent = 1`` completions for several ``user``\\ s ran all at once beside the broker."""
    answer = text("a steady answer of some length " * 4)
    scripted = ScriptedModel([answer] * 4, chunk_chars=8, tokens_per_second=300)
    async with live_app(tmp_path, scripted, max_concurrent=1) as live:
        async with listening(live.app) as url:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            hi = [{"role": "user", "content": "go"}]
            users = ("u1", "u2", "u3")
            await asyncio.gather(
                client.chat.completions.create(model="coder", messages=hi),  # the agent's own session: its queue
                *(client.chat.completions.create(model="coder", messages=hi, user=user) for user in users),
            )
            await client.close()
        sessions = ("agent:coder", *(f"agent:coder:user:{user}" for user in users))
        turns = sorted(
            (t for session in sessions for t in run_inline(live.ledger.turns.path(session))),
            key=lambda t: t.started_at,
        )
    assert [t.status for t in turns] == ["completed"] * 4
    for before, after in itertools.pairwise(turns):
        assert before.completed_at is not None
        assert after.started_at >= before.completed_at, "two turns ran at once with max_concurrent = 1"
