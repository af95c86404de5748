"""A full disk under ``nexus serve``: a message that cannot be written is the server's trouble, not the client's.

It was answered ``400 invalid_request``, which tells a client "your request is wrong, do not
retry". The request was fine; the server could not store it: 503 ``unavailable``, retry later.
Real full filesystem (a small tmpfs), skipped where mounting is not permitted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.config._server_schema import ServerConfig
from nexus.testing import ScriptedModel

from .broker_app import live_app


@pytest.fixture
def small_disk(tmpfs: Callable[[str], Path]) -> Path:
    """A 1 MB tmpfs mounted for the test (skipped where mounting is not permitted)."""
    return tmpfs("1m")


async def test_a_message_the_full_disk_cannot_hold_is_503_and_the_server_keeps_serving(small_disk: Path) -> None:
    big = "x" * 150_000
    async with live_app(small_disk, ScriptedModel([]), ServerConfig()) as live, live.client() as client:
        statuses: list[int] = []
        for i in range(12):  # 1.8 MB of messages into a 1 MB disk
            sent = await client.post(
                "/v1/agents/lead/messages", json={"content": big, "id": f"m-{i}", "mode": "collect"}
            )
            statuses.append(sent.status_code)
            if sent.status_code != 202:
                assert sent.status_code == 503, sent.text
                error = sent.json()["error"]
                assert error["type"] == "unavailable" and "disk is full" in error["message"]
                assert sent.headers.get("retry-after")
        assert 503 in statuses, statuses
        assert (await client.get("/v1/health")).status_code == 200
        accepted = {f"m-{i}" for i, status in enumerate(statuses) if status == 202}
        assert {item.message_id for item in live.store.items()} == accepted  # nothing half-stored


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem has not one byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)


async def test_health_says_degraded_while_a_full_disk_refuses_writes_and_ok_once_there_is_room(
    tmpfs: Callable[[str], Path],
) -> None:
    # it answered a bare "ok" while every write failed: a probe could not tell the ledger was read-only
    disk = tmpfs("4m")
    async with live_app(disk, ScriptedModel([]), ServerConfig()) as live, live.client() as client:
        assert (await client.get("/v1/health")).json()["status"] == "ok"
        _fill(disk / "filler")
        sent = await client.post("/v1/agents/lead/messages", json={"content": "x" * 150_000, "mode": "collect"})
        assert sent.status_code == 503, sent.text
        health = await client.get("/v1/health")
        assert health.status_code == 200  # reads still work: a restart would not help
        body = health.json()
        assert body["status"] == "degraded" and body["ledger"] == "read_only"
        assert "is full" in body["detail"] and "writes answer 503" in body["detail"]
        (disk / "filler").unlink()
        assert (await client.get("/v1/health")).json() == {"status": "ok", "version": body["version"], "ledger": "ok"}
        again = await client.post("/v1/agents/lead/messages", json={"content": "hi", "mode": "collect"})
        assert again.status_code == 202, again.text
