"""Chat completions to an agent's own session past its queue cap: told "dropped by the cap", not "failed".

A stranger's trial sent 60 concurrent SDK completions to one agent (cap 20, ``summarize``): the ones the
cap dropped were answered 502 "the agent's turn failed" — an upstream (model provider) failure, which
it was not — and the SDK, which retries 5xx by itself, sent them again: 79 queue items for 50 messages,
while the agent had already been told of the dropped ones in a ``[Queue overflow]`` summary.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .serve_proc import nexus, serving, write_config

openai = pytest.importorskip("openai", reason="the facade is tested with the official openai SDK (dev extra)")

pytestmark = pytest.mark.slow  # real processes


def _complete(url: str, outcomes: dict[str, Any], name: str) -> None:
    """One completion with the SDK's default retries: what it ended with."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=60)  # max_retries: the default, 2
    try:
        reply = client.chat.completions.create(model="w", messages=[{"role": "user", "content": f"job {name}"}])
        outcomes[name] = ("ok", reply.choices[0].message.content)
    except openai.APIStatusError as exc:
        outcomes[name] = (exc.status_code, exc.body, exc.response.headers.get("x-should-retry"))
    finally:
        client.close()


def test_a_completion_the_cap_dropped_is_a_429_the_sdk_does_not_resend(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with FakeProviderServer() as provider:
        release = threading.Event()  # the first turn holds the agent until the dropped one has its answer
        provider.script(stall(after_chunks=1, seconds=30, then=text("long done"), release=release))
        provider.default = text("ok")
        write_config(home, provider, broker='cap = 2\ndrop_policy = "summarize"')
        assert nexus(home, "agents", "add", "w").returncode == 0
        outcomes: dict[str, Any] = {}
        with serving(home) as (_, url):
            names = ["first", "a", "b", "c"]  # "first" runs (and stalls); a, b wait; c pushes a out
            threads = {name: threading.Thread(target=_complete, args=(url, outcomes, name)) for name in names}
            for name in names:
                threads[name].start()
                deadline = time.monotonic() + 30
                while len(httpx.get(f"{url}/v1/agents/w/queue?include_finished=true").json()["items"]) < (
                    names.index(name) + 1
                ):
                    assert time.monotonic() < deadline, f"{name} was never queued"
                    time.sleep(0.05)
                if name == "first":
                    while not provider.requests:
                        assert time.monotonic() < deadline, "the first turn never reached the model"
                        time.sleep(0.05)
            threads["a"].join(30)  # answered as "c" pushes it out, while "first" still runs
            release.set()
            for thread in threads.values():
                thread.join(60)
                assert not thread.is_alive()
            items = None
            with Ledger.open(home / "agents.db") as ledger:
                items = BrokerStore(ledger.database).items(agent_id="w")
    status, body, should_retry = outcomes["a"]
    assert status == 429 and should_retry == "false", outcomes["a"]
    assert body["type"] == "queue_full" and "queue cap 2 reached (drop policy summarize)" in body["message"], body
    assert "[Queue overflow]" in body["message"], body
    assert [outcomes[name][0] for name in ("first", "b", "c")] == ["ok", "ok", "ok"], outcomes
    assert len(items) == 4, items  # the dropped message was not sent again
    assert sorted(item.status for item in items) == ["delivered", "delivered", "delivered", "dropped"], items
