"""``nexus send --wait``: an interrupted turn is said and is exit 1; a manager that delegated without waiting
is waited for until the conversation settles, and its later answer is printed (the first reply was all).

Real ``nexus`` processes against the loopback fake provider; the model's answers depend on what it is
asked (``from_context``), since the manager's and the worker's runs overlap in time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from nexus.llm.types import Context, ToolResultMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import Step, from_context, last_user_text, stall, text, tool_call

from .cli_process import SRC, RunNexus

pytestmark = pytest.mark.slow  # real processes


def _team(context: Context) -> Step:
    """The manager delegates without waiting, then says so; the worker answers; the manager passes it on."""
    asked = last_user_text(context)
    if "[Message from worker]" in asked:
        return text("Final answer: the worker says 12 passed.")
    if "run the tests" in asked:
        return text("12 passed")
    if isinstance(context.messages[-1], ToolResultMessage):
        return text("I asked the worker; its answer follows.")
    return tool_call("send_message_to_agent", {"to": "worker", "content": "run the tests"})


def _agents(nexus: RunNexus) -> None:
    assert nexus("agents", "add", "lead", "--role", "manager").returncode == 0
    assert nexus("agents", "add", "worker").returncode == 0


def test_wait_on_a_manager_that_delegated_prints_the_answer_after_the_workers_reply(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """It printed "I asked the worker" and exit 0; the real answer came later, unseen."""
    server.default = from_context(_team)
    _agents(nexus)
    result = nexus("send", "lead", "check the tests", "--wait", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "I asked the worker; its answer follows.",
        "Final answer: the worker says 12 passed.",
    ]
    assert "lead answered again as the conversation went on" in result.stderr
    as_json = nexus("send", "lead", "check the tests again", "--wait", "--json", "--timeout", "60")
    outcome = json.loads(as_json.stdout)
    assert outcome["reply"] == "Final answer: the worker says 12 passed." and len(outcome["replies"]) == 2


def test_wait_through_a_running_server_waits_for_the_conversation_and_says_what_it_waits_for(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    server.default = from_context(_team)
    _agents(nexus)
    with _serving(home):
        result = nexus("send", "lead", "check the tests", "--wait", "--timeout", "60")
        assert result.returncode == 0, result.stderr
        assert "sent to the running nexus serve" in result.stderr
        assert result.stdout.strip().endswith("Final answer: the worker says 12 passed."), result.stdout
        port = json.loads((home / "server.json").read_text())["port"]
        token = json.loads((home / "server.json").read_text()).get("token")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        items = httpx.get(f"http://127.0.0.1:{port}/v1/agents/lead/queue", headers=headers).json()["items"]
        assert items == [], "nothing of the conversation was left waiting"


def test_wait_on_an_interrupted_turn_says_so_and_exits_1(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """It printed the partial text and exit 0, as if answered."""
    server.chunk_chars = 2
    server.script(stall(after_chunks=4, seconds=60, then=text("a long answer that is cut")), text("stopped."))
    assert nexus("agents", "add", "coder").returncode == 0
    waiting = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "coder", "long job", "--wait", "--timeout", "60"],
        env={**_environ(), "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not server.requests:  # the long job is streaming
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    time.sleep(0.3)
    interrupt = nexus("send", "coder", "stop that", "--mode", "interrupt")
    assert interrupt.returncode == 0, interrupt.stderr
    out, err = waiting.communicate(timeout=90)
    assert waiting.returncode == 1, err
    assert "nexus: error: the message's turn was interrupted: interrupted by message " in err, err  # not "no reason"
    listed = nexus("queue", "list", "coder", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    errors = [i["turn_error"] for i in json.loads(listed.stdout) if i["turn_status"] == "aborted"]
    assert len(errors) == 1 and errors[0].startswith("interrupted by message "), listed.stdout
    assert "a long" in out or out == ""  # what was streamed before the cut, if anything


def test_wait_timeout_gives_up_on_a_run_in_this_process_and_aborts_it(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """With the run in this process (no other broker), --timeout was ignored: it waited the whole run, exit 0."""
    server.chunk_chars = 2
    server.script(stall(after_chunks=2, seconds=20, then=text("the long answer")), text("later"))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "long job", "--wait", "--timeout", "1")
    assert result.returncode == 1, result.stderr
    assert "nexus: error: no reply within 1.0 s (the run was aborted" in result.stderr, result.stderr
    assert "the long answer" not in result.stdout
    listed = nexus("queue", "list", "coder", "--all", "--json")
    (item,) = json.loads(listed.stdout)
    assert (item["status"], item["turn_status"]) == ("delivered", "aborted"), item
    assert item["turn_error"] == "nexus send gave up waiting after 1 s (--timeout)", item
    again = nexus("send", "coder", "short one", "--wait", "--timeout", "60")  # the agent is free again
    assert (again.returncode, again.stdout.strip()) == (0, "later"), again.stderr


def test_wait_timeout_through_a_running_server_says_the_turn_is_running(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """It said "(the message stays queued)" while the other process was running the message's turn."""
    server.chunk_chars = 2
    server.script(stall(after_chunks=2, seconds=20, then=text("the long answer")))
    assert nexus("agents", "add", "coder").returncode == 0
    with _serving(home):
        result = nexus("send", "coder", "long job", "--wait", "--timeout", "3")
        assert result.returncode == 1, result.stderr
        assert "sent to the running nexus serve" in result.stderr
        assert "no reply within 3.0 s (its turn is running in the other process" in result.stderr, result.stderr
        assert "stays queued" not in result.stderr


@contextmanager
def _serving(home: Path) -> Iterator[None]:
    """A real ``nexus serve`` for ``home`` while the block runs (it has announced itself in server.json)."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "serve", "--port", "0", "--quiet"],
        env={**_environ(), "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (home / "server.json").exists():
            assert serve.poll() is None and time.monotonic() < deadline, "nexus serve did not start"
            time.sleep(0.05)
        yield
    finally:
        serve.kill()
        serve.wait()


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
