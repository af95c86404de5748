"""``nexus sessions compact LABEL [--focus TEXT]`` as a real subprocess against a fake provider server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, text

SRC = Path(__file__).resolve().parents[2] / "src"
LONG = "word " * 400


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def _nexus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args],
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=60,
        check=False,
    )


def _two_turns(home: Path, server: FakeProviderServer, session: str = "work") -> None:
    server.script(text("First long answer. " + LONG), text("Second long answer. " + LONG))
    for message in ("first " + LONG, "second " + LONG):
        assert _nexus(home, "run", "-s", session, message).returncode == 0


def test_compact_writes_a_manual_compaction_turn_that_the_next_run_starts_from(
    home: Path, server: FakeProviderServer
) -> None:
    _two_turns(home, server)
    server.script(text("Goal: testing sessions compact."), text("after compaction"))
    result = _nexus(home, "sessions", "compact", "work", "--focus", "keep the goal")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("compacted ") and "tokens" in result.stdout
    summary_request = server.requests[2].body or {}
    assert "keep the goal" in str(summary_request["messages"]), "the focus reaches the summariser"
    assert summary_request["model"] == "fake-model"
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("work"))
        assert [t.turn_type for t in turns] == ["normal", "normal", "compaction"]
        record = run_inline(ledger.turns.compaction(turns[2].id))
    assert record is not None and record.trigger == "manual" and "Goal: testing sessions compact" in record.summary
    assert _nexus(home, "run", "-s", "work", "third").returncode == 0
    first_user = next(m for m in (server.requests[3].body or {})["messages"] if m["role"] == "user")
    assert "[Previous conversation summary]" in str(first_user["content"])


def test_compact_that_would_not_shrink_changes_nothing(home: Path, server: FakeProviderServer) -> None:
    _two_turns(home, server)
    server.script(text("An extremely long summary. " + "detail " * 6000))
    result = _nexus(home, "sessions", "compact", "work")
    assert result.returncode == 0, result.stderr
    assert "not compacted" in result.stdout and "nothing was changed" in result.stdout
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.turn_type for t in run_inline(ledger.turns.path("work"))] == ["normal", "normal"]


def test_unknown_label_exits_2_with_cli_advice(home: Path, server: FakeProviderServer) -> None:
    missing_db = _nexus(home, "sessions", "compact", "nope")
    assert missing_db.returncode == 2
    assert "no session or alias named 'nope'" in missing_db.stderr and "nexus sessions list" in missing_db.stderr
    assert not (home / "agents.db").exists(), "a failed compact creates no ledger"
    _two_turns(home, server)
    result = _nexus(home, "sessions", "compact", "nope")
    assert result.returncode == 2
    assert "no session or alias named 'nope'" in result.stderr and "nexus sessions list" in result.stderr
    assert "Ledger." not in result.stderr and "Traceback" not in result.stderr
    assert len(server.requests) == 2, "no summariser call for an unknown session"
    with Ledger.open(home / "agents.db") as ledger:
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["work"]


def test_summariser_failure_exits_1_and_writes_nothing(home: Path, server: FakeProviderServer) -> None:
    _two_turns(home, server)
    server.script(http_error(400, "invalid request from the fake"))
    result = _nexus(home, "sessions", "compact", "work")
    assert result.returncode == 1
    assert "summarisation failed" in result.stderr and "Traceback" not in result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.turn_type for t in run_inline(ledger.turns.path("work"))] == ["normal", "normal"]


def test_help_lists_compact_and_its_options(home: Path) -> None:
    listing = _nexus(home, "sessions", "--help")
    assert listing.returncode == 0 and "compact" in listing.stdout
    detail = _nexus(home, "sessions", "compact", "--help")
    assert detail.returncode == 0 and "--focus TEXT" in detail.stdout and "LABEL" in detail.stdout


def test_a_rate_limited_summary_is_retried_with_a_notice_on_stderr(home: Path, server: FakeProviderServer) -> None:
    _two_turns(home, server)
    server.script(http_error(429, "slow down", retry_after=0.1), text("Goal: retried summary."))
    result = _nexus(home, "sessions", "compact", "work")
    assert result.returncode == 0, result.stderr
    assert "rate_limit" in result.stderr and result.stdout.startswith("compacted ")
    with Ledger.open(home / "agents.db") as ledger:
        record = run_inline(ledger.turns.compaction(run_inline(ledger.turns.path("work"))[-1].id))
    assert record is not None and record.summary == "Goal: retried summary."


def test_history_shows_the_summary_of_a_compaction_turn(home: Path, server: FakeProviderServer) -> None:
    """It showed the compaction turn as a bare header: the summary later runs start from was nowhere."""
    _two_turns(home, server)
    summary = "Goal: testing history.\nDone: two long answers. " + "detail " * 80 + "End."
    server.script(text(summary))
    assert _nexus(home, "sessions", "compact", "work").returncode == 0
    plain = _nexus(home, "sessions", "history", "work")
    assert plain.returncode == 0, plain.stderr
    shown = plain.stdout.split(" compaction]")[1]
    assert "  compaction (manual): 1 turn summarised through turn " in shown, shown
    assert "  summary: Goal: testing history. ⏎ Done: two long answers." in shown and "chars)" in shown, shown
    raw = _nexus(home, "sessions", "history", "work", "--raw")
    assert f"  summary: [Previous conversation summary]\n{summary}" in raw.stdout, raw.stdout  # as the model gets it
    lines = [json.loads(line) for line in _nexus(home, "sessions", "history", "work", "--json").stdout.splitlines()]
    (stored,) = [line["compaction"] for line in lines if "compaction" in line]
    assert (stored["summary"], stored["trigger"], stored["turns_summarized"]) == (summary, "manual", 1)
