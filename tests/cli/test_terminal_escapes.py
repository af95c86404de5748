"""Stored text printed to a terminal carries no raw control characters.

Anyone who can message an agent (a chat adapter's users, the HTTP API) writes the text that
``nexus sessions history`` and ``nexus route`` print. A stranger's trial sent
``zebra ESC]0;PWNED BEL ESC[2J giraffe``: printed raw, it set the operator's window title and
cleared the screen. Lines and tabs stay; every other control character is shown as an escape.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import qa_turn

SRC = Path(__file__).resolve().parents[2] / "src"
HOSTILE = "zebra \x1b]0;PWNED\x07 \x1b[2J giraffe \x9b31m\nsecond line\tand a tab"


def _nexus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("zoo")))
        run_inline(qa_turn(ledger, "zoo", HOSTILE, f"noted: {HOSTILE}"))
    return home


def _assert_escaped(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "\\x1b]0;PWNED\\x07" in out and "\\x1b[2J" in out and "\\x9b31m" in out
    assert "second line\tand a tab" in out  # lines and tabs are text, kept


def test_sessions_history_shows_control_characters_as_escapes(tmp_path: Path) -> None:
    done = _nexus(_home(tmp_path), "sessions", "history", "zoo")
    assert done.returncode == 0, done.stderr
    _assert_escaped(done.stdout)


def test_route_shows_a_checkpoint_preview_with_control_characters_as_escapes(tmp_path: Path) -> None:
    done = _nexus(_home(tmp_path), "route", "zebra giraffe")
    assert done.returncode == 0, done.stderr
    assert "zebra" in done.stdout and "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b" in done.stdout
