"""Drop policy ``new``: a message the full queue refuses is 429 ``queue_full`` at both HTTP doors.

It was 400 ``invalid_request`` "the queue is full" at ``POST …/messages`` and at the chat facade, while the
other cap drops (``old``, ``summarize``) are 429 ``queue_full``: a full queue is no fault of the request,
and this one, never queued, may be sent again once there is room (so the SDK may retry it by itself).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from nexus.broker import AgentIdentity, QueueOverrides
from nexus.engine import AgentSpec
from nexus.ledger._sql_db import run_inline
from nexus.testing import ScriptedModel
from nexus.testing.steps import stall, text

from .broker_app import listening, live_app, wait_until


async def test_a_message_refused_by_policy_new_is_a_429_queue_full_at_both_doors(tmp_path: Path) -> None:
    long = stall(after_chunks=4, seconds=30, then=text("the first words of a long answer"))
    scripted = ScriptedModel([long, text("second")], chunk_chars=4)
    async with live_app(tmp_path, scripted) as live:
        live.broker.register_agent(
            AgentIdentity("coder", "agent:coder", "worker"), spec=AgentSpec(model=scripted.model.ref),
            queue=QueueOverrides(cap=1, drop_policy="new"),
        )  # fmt: skip
        async with listening(live.app) as url, httpx.AsyncClient(base_url=url) as http:
            assert (await http.post("/v1/agents/coder/messages", json={"content": "long"})).status_code == 202
            await wait_until(lambda: run_inline(live.ledger.turns.open_turns()) != [])
            assert (await http.post("/v1/agents/coder/messages", json={"content": "waits"})).status_code == 202
            sent = await http.post("/v1/agents/coder/messages", json={"content": "no room", "id": "m-full"})
            chat = await http.post(
                "/v1/chat/completions", json={"model": "coder", "messages": [{"role": "user", "content": "no room"}]}
            )
            await http.post("/v1/agents/coder/abort")
        for refused in (sent, chat):
            error = refused.json()["error"]
            assert refused.status_code == 429 and error["type"] == "queue_full", refused.text
            assert "drop policy is 'new'" in error["message"] and "send it again later" in error["message"]
            assert "x-should-retry" not in refused.headers  # nothing was queued: a resend is no duplicate
        assert (chat.json()["error"]["code"], chat.json()["error"]["param"]) == ("queue_full", None)  # as OpenAI's
        statuses = sorted(item.status for item in live.store.items(agent_id="coder"))
        assert statuses.count("dropped") == 2 and len(statuses) == 4  # the refusals are recorded, as documented
