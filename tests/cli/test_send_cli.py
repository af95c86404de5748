"""``nexus send`` and ``nexus queue drain`` as real processes against the loopback fake provider."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.deliveries import DeliveryLog
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .cli_process import SRC, RunNexus


def _items(home: Path) -> list[tuple[str | None, str]]:
    with Ledger.open(home / "agents.db") as ledger:
        return [(item.message_id, item.status) for item in BrokerStore(ledger.database).items()]


def test_send_wait_prints_the_reply_and_records_the_turn(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    server.script(text("Hello, I am the coder."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "introduce yourself", "--id", "m-1", "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello, I am the coder.\n"
    assert "accepted m-1" in result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        (turn,) = run_inline(ledger.turns.path("agent:coder"))
        (item,) = BrokerStore(ledger.database).items()
        assert (item.status, item.turn_id) == ("delivered", turn.id)
    again = nexus("send", "coder", "introduce yourself", "--id", "m-1", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "delivered"
    assert "already accepted" not in again.stdout  # --json prints only the object
    assert len(server.requests) == 1  # the duplicate id did not run again


def test_send_json_reports_the_outcome(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    server.script(text("done"))
    nexus("agents", "add", "coder")
    result = nexus("send", "coder", "do it", "--json")
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "delivered" and outcome["reply"] == "done" and outcome["turn_id"]


def test_bad_input_exits_2_and_queues_nothing(home: Path, nexus: RunNexus) -> None:
    nexus("agents", "add", "coder")
    for argv, expected in (
        (["send", "ghost", "hi"], "unknown agent 'ghost' (known: coder)"),
        (["send", "coder", "hi", "--mode", "later"], "unknown queue mode 'later'"),
        (["send", "coder", "hi", "--from", "nobody"], "--from 'nobody' is not a registered agent"),
        (["send", "coder", "hi", "--from", "coder"], "cannot send a message to itself"),
        (["send", "coder", "   "], "empty"),
    ):
        result = nexus(*argv)
        assert result.returncode == 2, (argv, result.stderr)
        assert expected in result.stderr and "Traceback" not in result.stderr
    assert _items(home) == []


def test_with_another_drainer_the_message_waits_for_it(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    nexus("agents", "add", "coder")
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # "a server" holds the broker lock
    try:
        result = nexus("send", "coder", "later please", "--id", "m-9")
        assert result.returncode == 0 and "another process holds the broker lock" in result.stderr
        assert _items(home) == [("m-9", "queued")] and server.requests == []
        busy = nexus("queue", "drain")
        assert busy.returncode == 1 and "another process already drains this NEXUS_HOME" in busy.stderr
    finally:
        os.close(lock)
    server.script(text("ran at last"))
    drained = nexus("queue", "drain")
    assert drained.returncode == 0, drained.stderr
    assert _items(home) == [("m-9", "delivered")]


def test_a_send_past_the_queue_cap_of_a_waiting_agent_says_so(home: Path, nexus: RunNexus) -> None:
    """A trial's 100 concurrent sends all said only "accepted" while the holder's cap later dropped 79: the
    sender hears when its message joined a queue already past the cap (the agent's own cap here)."""
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write('\n[agents.coder]\nqueue = { cap = 2, drop_policy = "old" }\n')
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # "a server" holds the broker lock: the messages wait for it
    try:
        said = [nexus("send", "coder", f"task {n}", "--id", f"m-{n}") for n in range(3)]
        again = nexus("send", "coder", "task 2", "--id", "m-2")
    finally:
        os.close(lock)
    assert all(result.returncode == 0 for result in [*said, again])
    assert "past its queue cap" not in said[0].stderr + said[1].stderr  # 1 and 2 waiting: at the cap, not past
    assert "3 messages wait for coder in agent:coder, past its queue cap of 2 (drop policy 'old')" in said[2].stderr
    assert "nexus queue list coder --all" in said[2].stderr
    assert "past its queue cap" not in again.stderr  # a duplicate id queued nothing more
    assert [status for _, status in _items(home)] == ["queued"] * 3  # nothing dropped by the sender itself


def test_wait_takes_over_when_the_other_broker_goes_away(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    import subprocess
    import sys
    import time

    nexus("agents", "add", "coder")
    server.script(text("ran here"))
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "coder", "hello", "--wait", "--timeout", "60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while _items(home) == [] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [status for _, status in _items(home)] == ["queued"]
    finally:
        os.close(lock)  # "the server" stops
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out == "ran here\n"


def test_chat_with_an_agent_runs_each_line_as_its_turn(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    server.script(text("first reply"), text("second reply"))
    nexus("agents", "add", "coder")
    result = nexus("chat", "--agent", "coder", stdin="hello\nand again\n/exit\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "first reply\nsecond reply\n"
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.status for t in run_inline(ledger.turns.path("agent:coder"))] == ["completed", "completed"]
        assert [s for _, s in _items(home)] == ["delivered", "delivered"]
    unknown = nexus("chat", "--agent", "ghost", stdin="hi\n")
    assert unknown.returncode == 2 and "unknown agent 'ghost'" in unknown.stderr


def test_deliver_streams_the_reply_through_an_adapter(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    out = home / "deliveries.jsonl"
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write('\n[adapters.files]\nbuiltin = "jsonl"\n')
        config.write(f'[adapters.files.accounts.a]\nconfig = {{ path = "{out}" }}\n')
    server.script(text("Delivered words."))
    nexus("agents", "add", "coder")
    result = nexus("send", "coder", "say it", "--wait", "--deliver", "files/a:me", "--id", "d-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Delivered words.\n"
    assert "delivered to files/a:me" in result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert "Delivered words." in json.dumps(lines)
    with Ledger.open(home / "agents.db") as ledger:  # where the reply went is kept with the turn
        (record,) = DeliveryLog(ledger.database).recent()
        (item,) = BrokerStore(ledger.database).items()
    assert (record.turn_id, record.status, record.path) == (item.turn_id, "delivered", "native")
    assert record.message_ids == [lines[0]["message_id"]] and record.queue_item_id == item.id
    history = nexus("sessions", "history", "agent:coder")
    assert f"⇢ delivered to files/a:me (native); message ids: {lines[0]['message_id']}" in history.stdout
    again = nexus("send", "coder", "say it", "--deliver", "files/a:me", "--id", "d-1")
    assert again.returncode == 0 and "not delivered again" in again.stderr
    assert len(out.read_text().splitlines()) == len(lines)  # nothing sent twice, nothing recorded twice
    with Ledger.open(home / "agents.db") as ledger:
        assert len(DeliveryLog(ledger.database).recent()) == 1
    bad = nexus("send", "coder", "x", "--deliver", "nowhere/a:me")
    assert bad.returncode == 2 and "no adapter named 'nowhere' (configured: files)" in bad.stderr
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write("[adapters.files.accounts.off]\nenabled = false\n")
    disabled = nexus("send", "coder", "x", "--deliver", "files/off:me")
    assert disabled.returncode == 2 and "files/off is disabled; enable it with nexus adapters enable" in disabled.stderr
    malformed = nexus("send", "coder", "x", "--deliver", "files-a-me")
    assert malformed.returncode == 2 and "expected NAME/ACCOUNT:TARGET" in malformed.stderr


def test_a_failed_send_says_why_without_wait(home: Path, nexus: RunNexus) -> None:
    """Exit 1 always comes with the reason on stderr, also without ``--wait`` (docs/cli.md)."""
    nexus("agents", "add", "lead", "--role", "manager", "--model", "anthropic/claude-sonnet-4-5")
    for extra in ([], ["--wait"]):
        result = nexus("send", "lead", "status?", *extra, env={"ANTHROPIC_API_KEY": ""})
        assert result.returncode == 1, result.stderr
        assert "nexus: error: the message failed: no usable model" in result.stderr
        assert "ANTHROPIC_API_KEY" in result.stderr and "Traceback" not in result.stderr


def test_drain_closes_the_turn_of_a_message_cut_three_times(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """The third SIGKILLed run fails its message, so nothing runs that session again: drain closes its turn,
    and says which message it failed (exit 1; it printed "draining 0 queued messages" and exited 0)."""
    import signal
    import subprocess
    import sys
    import time

    from nexus.testing.steps import stall

    nexus("agents", "add", "coder")
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    server.script(*[stall(after_chunks=1, seconds=60, then=text("late")) for _ in range(3)])
    for attempt in range(3):  # each run is SIGKILLed mid-reply (its request stalled), its turn left open
        argv = ["queue", "drain"] if attempt else ["send", "coder", "hi", "--id", "m-1"]
        process = subprocess.Popen([sys.executable, "-m", "nexus.cli", *argv], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 60
        while len(server.requests) <= attempt and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.requests) == attempt + 1, "the run never reached the model"
        process.send_signal(signal.SIGKILL)
        process.wait()
    drained = nexus("queue", "drain")
    assert drained.returncode == 1, drained.stderr
    assert _items(home) == [("m-1", "failed")]
    assert "closed 1 turn left open by a stopped process" in drained.stderr
    assert drained.stderr.splitlines()[-1] == (
        "nexus: error: 1 of 1 drained message failed: coder (message m-1): "
        "its run was cut 3 times (the process died); not retried again"
    )
    again = nexus("queue", "drain")
    assert again.returncode == 0, again.stderr  # failed by the drain before: not reported twice
    with Ledger.open(home / "agents.db") as ledger:
        assert run_inline(ledger.turns.open_turns()) == []
        assert [turn.status for turn in run_inline(ledger.turns.path("agent:coder"))][-1] == "aborted"


def test_a_failed_turn_fails_the_drain_and_shows_in_the_queue_list(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """The message counts as handled (``delivered``: never run again), but its turn failed: exit 1, the reason shown."""
    from nexus.testing.steps import http_error

    nexus("agents", "add", "coder")
    server.script(http_error(400, "bad request: nope"), text("fine"), http_error(400, "still nope"))
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # queued for "another broker": the drain below runs them
    try:
        for n in (1, 2):
            assert nexus("send", "coder", f"job {n}", "--id", f"m-{n}", "--mode", "followup").returncode == 0
    finally:
        os.close(lock)
    drained = nexus("queue", "drain")
    assert drained.returncode == 1
    failed_line = [line for line in drained.stderr.splitlines() if line.startswith("nexus: error:")]
    assert len(failed_line) == 1 and "Traceback" not in drained.stderr
    assert failed_line[0].startswith("nexus: error: 1 of 2 drained messages failed: coder (message m-1, turn ")
    assert failed_line[0].endswith("): its turn failed: 400 invalid_request_error: bad request: nope")
    assert _items(home) == [("m-1", "delivered"), ("m-2", "delivered")]  # consumed: neither runs again
    listed = nexus("queue", "list", "--all")
    header, first, reason, second = listed.stdout.splitlines()
    assert "STATUS     TURN" in header
    assert " delivered  failed " in first and " delivered  completed " in second
    assert reason.strip() == "reason: its turn failed: 400 invalid_request_error: bad request: nope"
    items = json.loads(nexus("queue", "list", "--all", "--json").stdout)
    assert [(i["status"], i["turn_status"], i["turn_error"]) for i in items] == [
        ("delivered", "failed", "400 invalid_request_error: bad request: nope"),
        ("delivered", "completed", None),
    ]
    assert set(items[0]) >= {"id", "agent", "session", "message_id", "status", "error", "turn_id", "content"}
    again = nexus("queue", "drain")
    assert again.returncode == 0 and len(server.requests) == 2  # the failed turn is not judged (nor run) twice
    sent = nexus("send", "coder", "job 3", "--id", "m-3", "--wait")
    assert sent.returncode == 1 and "Traceback" not in sent.stderr
    assert "nexus: error: the message's turn failed: 400 invalid_request_error: still nope" in sent.stderr
    as_json = json.loads(nexus("send", "coder", "job 3", "--id", "m-3", "--json").stdout)
    assert (as_json["status"], as_json["turn_status"]) == ("delivered", "failed")


def test_queue_list_says_when_processing_messages_have_no_drain_left(home: Path, nexus: RunNexus) -> None:
    """Every drain killed with -9 left a message `processing` that `nexus queue list` showed as busy, with no
    hint that nothing runs it (a stranger's trial); while a drain holds the broker lock nothing is said."""
    nexus("agents", "add", "coder")
    with Ledger.open(home / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        item, _ = store.accept(
            agent_id="coder", session_label="agent:coder", message_id="m-cut", sender="user",
            message={"content": "cut off", "from": "user"}, mode="followup",
        )  # fmt: skip
        store.claim([item.id])
    orphaned = nexus("queue", "list")
    assert orphaned.returncode == 0 and "processing" in orphaned.stdout, orphaned.stderr
    assert "1 message shows processing but no nexus serve or drain runs" in orphaned.stderr
    assert "`nexus queue drain` runs them again" in orphaned.stderr
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a drain runs
    try:
        running = nexus("queue", "list")
    finally:
        os.close(lock)
    assert running.returncode == 0 and "no nexus serve or drain runs" not in running.stderr, running.stderr


def test_a_closed_stdout_does_not_stop_the_agent(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    """``nexus send --wait … | head`` (docs/cli.md): the reader going away stops the printing, not the turn.

    The message is in the agent's queue; its turn runs to the end and is stored whoever reads the reply, and
    the command exits 141 without an error or a traceback once the conversation settled (``nexus run … | head``
    exits 141 too, but aborts its run: there the reader is the only one waiting for the reply).
    """
    reply = " ".join(f"word{n}" for n in range(40_000))  # ~300 KB: far past what a pipe holds
    server.script(stall(after_chunks=3, seconds=1.0, then=text(reply)))  # the reader is gone before most of it
    assert nexus("agents", "add", "coder").returncode == 0
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    read, write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "coder", "write a lot", "--wait"],
        stdout=write, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        assert reader.read(10) == b"word0 word"
    # the reader is gone (as `head -c 10` exits)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 141, stderr  # as any command whose reader went away (a shell's SIGPIPE)
    assert "Traceback" not in stderr and "error" not in stderr, stderr
    with Ledger.open(home / "agents.db") as ledger:
        (turn,) = run_inline(ledger.turns.path("agent:coder"))
        assert turn.status == "completed"
    history = nexus("sessions", "history", "agent:coder")
    assert "word39999" in history.stdout, "the whole reply was stored"
