"""Wake-ups across processes on PostgreSQL: a message accepted in one process starts on a broker in another.

The broker polls the queue only every 10 minutes here, so a run that starts at all was woken by the
notification (LISTEN on its own connection); with wake-ups off (``wakeups = "poll"``, or
``NEXUS_PG_LISTEN=0``) the poll alone starts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

import pytest

from nexus.ledger import AcceptRequest, Ledger

WORKER = Path(__file__).with_name("lease_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"
NEVER_MS = 600_000


class Broker:
    """A broker process; a thread reads its run events as they come."""

    def __init__(self, url: str, poll_ms: int, wakeups: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), url, "15000", "0.05", str(poll_ms), wakeups],
            env={**os.environ, "PYTHONPATH": str(SRC), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.events: queue.Queue[dict[str, object]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):  # run events; the worker's last line is its "conflicts N" summary
                self.events.put(json.loads(line))

    def started(self, item_id: str, within_s: float = 60) -> dict[str, object]:
        """The ``start`` event of the run that took ``item_id``, waited for a minute at most: far beyond any
        wake-up, far inside the 10-minute poll."""
        deadline = time.monotonic() + within_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            if event["event"] == "start" and item_id in cast(list[str], event["items"]):
                return event
        raise AssertionError(f"no run took {item_id} (the broker was never woken)")


async def _accept(url: str, message_id: str) -> str:
    async with await Ledger.connect(url) as ledger:
        body = {"id": message_id, "from": "user", "to": "w", "content": "hi"}
        item, _ = await ledger.queue.accept(AcceptRequest("w", "agent:w", message_id, "user", body, "followup"))
        return item.id


@pytest.fixture
def url(postgres_url: str) -> str:
    async def register() -> None:
        async with await Ledger.connect(postgres_url) as ledger:
            await ledger.agents.save("w", role="worker", session_label="agent:w", spec={})

    asyncio.run(register())
    return postgres_url


@pytest.mark.parametrize(("poll_ms", "wakeups", "env"), [
    (NEVER_MS, "notify", {}),  # only a notification can start it
    (100, "poll", {}),  # the switch for pgbouncer: the poll alone
    (100, "notify", {"NEXUS_PG_LISTEN": "0"}),
], ids=["notify", "poll-only", "listen-off"])  # fmt: skip
def test_a_message_accepted_in_one_process_starts_on_a_broker_in_another(
    url: str, poll_ms: int, wakeups: str, env: dict[str, str]
) -> None:
    broker = Broker(url, poll_ms, wakeups, env)
    try:
        item_id = asyncio.run(_accept(url, "m1"))  # this test's process is the one that accepts
        assert broker.started(item_id)["pid"] == broker.proc.pid
        second = asyncio.run(_accept(url, "m2"))  # and again, once the first run released the session
        assert broker.started(second)["pid"] == broker.proc.pid
    finally:
        broker.proc.terminate()
        broker.proc.wait(timeout=60)
    err = broker.proc.stderr.read() if broker.proc.stderr else ""
    assert "Traceback" not in err, err
