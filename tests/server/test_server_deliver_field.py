"""Issue 12 lists ``deliver?`` in the body of ``POST /v1/agents/{id}/messages`` (``nexus send --deliver``
over HTTP). The endpoint refuses the field today: a client cannot route a reply to a chat adapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.testing import ScriptedModel
from nexus.testing.steps import text

from .broker_app import live_app


@pytest.mark.xfail(
    strict=True,
    reason="POST /v1/agents/{id}/messages has no `deliver` field (server/_messages.py, being reworked): "
    "an unknown adapter there must be a 400 naming it, a known one accepted like `nexus send --deliver`",
)
async def test_messages_accept_a_deliver_target(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("done")])) as live, live.client() as client:
        sent = await client.post(
            "/v1/agents/coder/messages", json={"content": "status?", "deliver": "nosuch/main:chat:1"}
        )
        # today: 422 "deliver: Extra inputs are not permitted"; wanted: the target is parsed and checked
        assert sent.status_code == 400, sent.text
        assert "nosuch" in sent.json()["error"]["message"]
        assert live.store.items() == []
