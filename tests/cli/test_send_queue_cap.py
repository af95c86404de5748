"""The queue cap applies to messages ``nexus send`` queues for another process's broker, as over HTTP.

Five follow-ups queued from the CLI while a ``nexus send --wait`` held the broker lock all ran under
``cap = 2`` (the holder adopted them without the cap; the CLI even warned that some may be dropped),
while the same five sent to ``nexus serve`` dropped three and began the next turn with the
``[Queue overflow]`` summary. Real ``nexus`` processes against the loopback fake provider.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nexus.ledger import BrokerStore, Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .cli_process import SRC, RunNexus
from .fake_config import write_fake_config

pytestmark = pytest.mark.slow  # real processes


def test_followups_queued_from_the_cli_for_a_busy_holder_obey_the_cap_and_summarize(
    isolated_env: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    write_fake_config(isolated_env, server, extra='[broker]\ncap = 2\ndrop_policy = "summarize"\n')
    server.chunk_chars = 2
    release = threading.Event()  # the long job streams until the five are queued, however slow the machine
    server.script(stall(after_chunks=2, seconds=120, then=text("long done"), release=release))
    server.default = text("ok")
    assert nexus("agents", "add", "w10").returncode == 0
    holder = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "w10", "a long job", "--wait", "--timeout", "150"],
        env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not server.requests:  # the long job is streaming: the holder has the broker lock
        assert time.monotonic() < deadline and holder.poll() is None, "the long run did not start"
        time.sleep(0.05)
    for n in range(1, 6):
        sent = nexus("send", "w10", f"m{n}", "--mode", "followup")
        assert sent.returncode == 0, sent.stderr
    deadline = time.monotonic() + 60
    while _dropped(isolated_env) < 3:  # the holder adopts each row at its next look (0.25 s, longer under load)
        if time.monotonic() > deadline or holder.poll() is not None:
            break  # the assertions below say what happened
        time.sleep(0.1)
    release.set()
    out, err = holder.communicate(timeout=120)
    assert holder.returncode == 0 and out.strip() == "long done", err
    listed = nexus("queue", "list", "w10", "--all", "--json")
    dropped = [i for i in json.loads(listed.stdout) if i["status"] == "dropped"]
    assert len(dropped) == 3, listed.stdout  # none was: all five ran
    assert {i["error"] for i in dropped} == {"queue cap 2 reached (drop policy summarize)"}, dropped
    asked = [_last_user_text(r.body) for r in server.requests[1:]]
    assert len(asked) == 2, asked  # m4, then m5: the three oldest were dropped
    summary = "[Queue overflow] Dropped 3 messages due to cap.\nSummary:\n- m2\n- m3\n\nm4"  # at most cap lines
    assert asked[0].endswith(summary), asked[0]
    assert asked[1].endswith("m5") and "[Queue overflow]" not in asked[1], asked[1]


def _last_user_text(body: object) -> str:
    """The text of the last user message of an OpenAI chat completions request."""
    assert isinstance(body, dict)
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def _dropped(home: Path) -> int:
    """How many of the holder's queue rows are ``dropped`` so far (read from the ledger file, as another process)."""
    with Ledger.open(home / "agents.db") as ledger:
        return sum(1 for item in BrokerStore(ledger.database).items(agent_id="w10") if item.status == "dropped")
