"""``nexus chat`` driven through a pipe (a real subprocess): turns, slash commands, Ctrl-C during a reply."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, UserMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import reply, stall, text

from .pipe_reader import PipeReader

SRC = Path(__file__).resolve().parents[2] / "src"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def _chat(home: Path, lines: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", "chat", *args],
        capture_output=True,
        text=True,
        env=_env(home),
        input="".join(line + "\n" for line in lines),
        timeout=60,
        check=False,
    )


def test_two_turns_then_end_of_input(home: Path, server: FakeProviderServer) -> None:
    server.script(text("First answer."), text("Second answer."))
    result = _chat(home, ["hello", "", "and again"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "First answer.\nSecond answer.\n"
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
    assert [t.status for t in turns] == ["completed", "completed"]
    second_request = server.requests[1].body or {}
    assert any("First answer." in str(m.get("content")) for m in second_request["messages"])


def test_reply_cut_at_the_output_limit_is_noted(home: Path, server: FakeProviderServer) -> None:
    server.script(reply(text("Half of an ans"), stop_reason="length"), text("Full answer."))
    result = _chat(home, ["long question", "short question"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Half of an ans\nFull answer.\n"
    notices = [line for line in result.stderr.splitlines() if "output limit" in line]
    assert len(notices) == 1 and "(max_tokens)" in notices[0], "only the cut reply gets the notice"
    assert notices[0].endswith("raise it in nexus.toml: [providers.fake.models.fake-model] max_tokens = …")


def test_slash_commands_session_fork_history(home: Path, server: FakeProviderServer) -> None:
    server.script(text("Answer in main."), text("Answer in the fork."), text("Answer in other."))
    result = _chat(
        home,
        [
            "question one",
            "/history",
            "/fork",
            "question in fork",
            "/history 5",
            "/session other",
            "question in other",
            "/sessions",
            "/session main",
            "/history 1",
            "/exit",
            "never sent",
        ],
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    with Ledger.open(home / "agents.db") as ledger:
        main_turns = run_inline(ledger.turns.path("main"))
        fork_label = next(s.label for s in run_inline(ledger.sessions.list()) if s.origin == "fork")
        fork_turns = run_inline(ledger.turns.path(fork_label))
        other_turns = run_inline(ledger.turns.path("other"))
    assert len(main_turns) == 1 and len(fork_turns) == 2 and len(other_turns) == 1
    assert fork_turns[0].id == main_turns[0].id, "the fork shares main's first turn"
    assert f"forked at {main_turns[0].id}: now in session {fork_label}" in out
    assert f"{main_turns[0].id}  completed" in out
    assert "you: question one" in out and "agent: Answer in main." in out
    assert "you: question in fork" in out
    assert "session: other (new: created with its first message)" in out
    assert re.search(r"^\* other ", out, re.MULTILINE) and re.search(r"^  main ", out, re.MULTILINE)
    assert "session: main (1 turn)" in out
    assert len(server.requests) == 3, "lines after /exit are not sent"
    fork_request = server.requests[1].body or {}
    assert any("question one" in str(m.get("content")) for m in fork_request["messages"])
    other_request = server.requests[2].body or {}
    assert not any("question one" in str(m.get("content")) for m in other_request["messages"])


def test_model_and_thinking_commands(home: Path, server: FakeProviderServer) -> None:
    server.script(text("from the other model"))
    result = _chat(
        home,
        ["/model", "/model gpt-4o", "/model fake/other-model", "/thinking extreme", "/thinking low", "hi", "/help"],
    )
    assert result.returncode == 0, result.stderr
    assert "model: fake/fake-model" in result.stdout
    assert "model: fake/other-model" in result.stdout
    assert "'provider/model'" in result.stderr, "a malformed model ref is refused with the expected form"
    assert "unknown thinking level 'extreme'" in result.stderr
    assert "thinking: low" in result.stdout
    assert (server.requests[0].body or {})["model"] == "other-model"
    assert "/compact [FOCUS]" in result.stdout and "/fork [TURN_ID]" in result.stdout


def test_unknown_command_and_bad_history_argument_keep_the_chat_alive(home: Path, server: FakeProviderServer) -> None:
    server.script(text("still here"))
    result = _chat(home, ["/frobnicate", "/history abc", "/fork", "/compact", "hello"])
    assert result.returncode == 0
    assert "unknown command /frobnicate" in result.stderr
    assert "/history takes a number of turns" in result.stderr
    assert "nothing to fork yet" in result.stderr
    assert "nothing to compact yet" in result.stderr
    assert result.stdout.endswith("still here\n")


def test_compact_writes_a_compaction_turn(home: Path, server: FakeProviderServer) -> None:
    long = "word " * 400
    server.script(
        text("First long answer. " + long),
        text("Second long answer. " + long),
        text("Goal: testing compaction. Progress: two answers given."),
        text("after compaction"),
    )
    result = _chat(home, ["first " + long, "second " + long, "/compact keep the goal", "third"])
    assert result.returncode == 0, result.stderr
    assert "compacted " in result.stdout
    summary_request = server.requests[2].body or {}
    assert "keep the goal" in str(summary_request["messages"]), "the focus reaches the summariser"
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.turn_type for t in turns] == ["normal", "normal", "compaction", "normal"]
        record = run_inline(ledger.turns.compaction(turns[2].id))
    assert record is not None and "Goal: testing compaction" in record.summary
    last_request = server.requests[3].body or {}
    first_user = next(m for m in last_request["messages"] if m["role"] == "user")
    assert "[Previous conversation summary]" in str(first_user["content"])


def test_ctrl_c_aborts_the_reply_not_the_chat(home: Path, server: FakeProviderServer) -> None:
    reply = "Part of the answer comes now and the rest never arrives in time."
    server.script(stall(after_chunks=3, seconds=60, then=text(reply)), text("Next answer."))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    assert proc.stdin is not None
    out, err = PipeReader(proc.stdout), PipeReader(proc.stderr)
    out.start()
    err.start()
    try:
        proc.stdin.write("tell me\n")
        proc.stdin.flush()
        assert out.wait_for("Part of"), f"no partial output; stderr: {err.data}"
        proc.send_signal(signal.SIGINT)
        assert err.wait_for("interrupted"), err.data
        proc.stdin.write("go on\n/history\n")
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    out.join(5)
    assert "Next answer." in out.data
    assert re.search(r"\S+  aborted", out.data), out.data
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["aborted", "completed"]
        history = run_inline(ledger.turns.history("main"))
    assert isinstance(history[0], UserMessage)
    assert isinstance(history[1], AssistantMessage) and reply.startswith(history[1].text) and history[1].text


def test_compact_that_would_not_shrink_changes_nothing(home: Path, server: FakeProviderServer) -> None:
    words = "word " * 60
    server.script(
        text("a short answer " + words),
        text("another short answer " + words),
        text("An extremely long summary. " + "detail " * 3000),
        text("still here"),
    )
    result = _chat(home, ["first " + words, "second " + words, "/compact", "third"])
    assert result.returncode == 0, result.stderr
    assert "not compacted" in result.stdout and "nothing was changed" in result.stdout
    assert "compacted 2" not in result.stdout and "compacted 3" not in result.stdout
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.turn_type for t in run_inline(ledger.turns.path("main"))] == ["normal", "normal", "normal"]


def test_model_command_refuses_an_unusable_model_and_keeps_the_current_one(
    home: Path, server: FakeProviderServer
) -> None:
    server.script(text("still the fake model"))
    result = _chat(home, ["/model foo/bar", "/model openai/gpt-4o-mini", "/model", "hello"])
    assert result.returncode == 0, result.stderr
    assert "unknown provider 'foo'" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "StreamOptions" not in result.stderr and "Traceback" not in result.stderr
    assert "model: fake/fake-model" in result.stdout and "still the fake model" in result.stdout
    with Ledger.open(home / "agents.db") as ledger:
        assert [(t.status, t.model) for t in run_inline(ledger.turns.path("main"))] == [("completed", "fake-model")]


def test_fork_names_are_the_parent_label_and_a_counter(home: Path, server: FakeProviderServer) -> None:
    server.script(text("Answer in main."))
    with Ledger.open(home / "agents.db") as ledger:  # a label taken by hand is skipped, not reused
        run_inline(ledger.sessions.create(NewSession("main-fork-2")))
    result = _chat(home, ["question one", "/fork", "/session main", "/fork", "/fork", "/exit"])
    assert result.returncode == 0, result.stderr
    forks = re.findall(r"now in session (\S+)", result.stdout)
    assert forks == ["main-fork-1", "main-fork-3", "main-fork-3-fork-1"]
    with Ledger.open(home / "agents.db") as ledger:
        head = run_inline(ledger.sessions.head("main"))
        assert head is not None and all(run_inline(ledger.sessions.head(label)).id == head.id for label in forks)  # type: ignore[union-attr]


def test_one_compacted_message_is_singular() -> None:
    from nexus.cli._render import describe_engine_event
    from nexus.engine.types import CompactionStartEvent
    from nexus.engine.wiring.compact_session import SessionCompaction

    _, line, _ = describe_engine_event(CompactionStartEvent("manual", 1, 40))
    assert line == "⋯ compacting the conversation (1 message, ~40 tokens)"
    from nexus.ledger import CompactionRecord

    result = CompactionRecord(summary="summary", summarized_through_turn_id="", tokens_before=40, tokens_after=10)
    compacted = SessionCompaction("main", "compacted", result, "t1", messages_summarized=1)
    assert compacted.message.startswith("compacted 1 message into a summary")
    assert "of 1 message would not" in SessionCompaction("main", "not_smaller", result, messages_summarized=1).message
