"""A sender whose message makes a running ``nexus serve`` drop older ones is told so, over HTTP and by the CLI.

A stranger's trial sent 100 ``nexus send`` at once to an agent while ``nexus serve`` ran: all 100 said
"accepted" and exited 0, and 79 messages ended ``dropped`` by the queue cap without a word to anyone
(the server applies the cap at once; the CLI's over-cap hint only covered a queue waiting for another
process). The 202 answer now names the messages the cap pushed out (``pushed_out``), and ``nexus send``
prints one line naming them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .serve_proc import nexus, serving, write_config

pytestmark = pytest.mark.slow  # real processes


def test_the_sender_hears_which_messages_the_cap_dropped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    held = threading.Event()  # m0's run streams until the queue was read: a 20 s stall ended first at load 15
    with FakeProviderServer() as provider:
        provider.script(stall(after_chunks=1, seconds=600, then=text("long done"), release=held))
        provider.default = text("ok")
        write_config(home, provider, broker='cap = 2\ndrop_policy = "summarize"')
        assert nexus(home, "agents", "add", "w").returncode == 0
        with serving(home):
            try:
                assert nexus(home, "send", "w", "a long job", "--id", "m0").returncode == 0
                deadline = time.monotonic() + 30
                while not provider.requests:  # m0's turn streams: the next ones wait in the queue
                    assert time.monotonic() < deadline, "the long run did not start"
                    time.sleep(0.05)
                sent = [
                    nexus(home, "send", "w", f"follow-up {n}", "--id", f"m{n}", "--mode", "followup") for n in (1, 2)
                ]
                assert all(done.returncode == 0 and "dropped" not in done.stderr for done in sent), sent
                third = nexus(home, "send", "w", "follow-up 3", "--id", "m3", "--mode", "followup")
                listed = nexus(home, "queue", "list", "w", "--all", "--json")
            finally:
                held.set()

    assert third.returncode == 0, third.stderr
    assert "nexus: the queue cap of w dropped 1 older message to make room for this one (m1)" in third.stderr
    assert "`nexus queue list w --all` shows them" in third.stderr
    status = {item["message_id"]: item["status"] for item in json.loads(listed.stdout)}
    assert status["m1"] == "dropped" and status["m3"] == "queued", status
