"""The disk holding NEXUS_HOME fills up mid-run (a real tmpfs filled to the last byte).

Issue 8 item 3: every failed journal write printed a traceback, the final write failed with a
traceback and the 40 KB reply shown on screen was not in the ledger. Item 11: with the disk
full and an open turn, ``nexus sessions list`` failed with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .fake_config import write_fake_config

SRC = Path(__file__).resolve().parents[2] / "src"
REPLY = " ".join(f"word{i:05d}" for i in range(4000))  # 40 KB


@pytest.fixture
def small_disk(tmpfs: Callable[[str], Path]) -> Path:
    """A 4 MB tmpfs mounted for the test (skipped where mounting is not permitted)."""
    return tmpfs("4m")


def fill(path: Path) -> None:
    """Write ``path`` until the filesystem has not one byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            block = b"\0" * size
            try:
                while True:
                    os.write(fd, block)
            except OSError:
                continue
    finally:
        os.close(fd)


def _env(home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    extra = {"NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "TMPDIR": str(tmp)}
    return {**env, **extra}


def _nexus(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_disk_full_mid_run_keeps_the_reply_and_lists_sessions(small_disk: Path, tmp_path: Path) -> None:
    home, tmp = small_disk / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    full = threading.Event()  # the reply stalls until the disk is full, however slow the machine
    with FakeProviderServer(text("one"), stall(after_chunks=2, seconds=120, then=text(REPLY), release=full)) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
        proc = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "run", "tell me a long story"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < 2:  # the turn is open and the reply stalls: now the disk fills up
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        fill(small_disk / "filler")
        full.set()
        out, err = proc.communicate(timeout=120)

    assert proc.returncode == 1, err
    assert out.strip() == REPLY  # what the user saw
    assert "Traceback" not in err, err
    assert err.count("could not write the crash journal") <= 1, err
    assert all(line.startswith("nexus: ") for line in err.splitlines() if "crash journal" in line), err
    lines = [line for line in err.splitlines() if "could not save turn" in line]
    assert len(lines) == 1 and "the disk is full" in lines[0], err
    found = re.search(r"the reply is kept in (\S+\.json)", lines[0])
    assert found is not None, lines[0]
    rescue = Path(found[1])
    assert rescue.is_relative_to(tmp), "the full disk cannot take it: the temp dir does"
    assert json.loads(rescue.read_text())["text"] == REPLY

    # item 11: listing sessions works with the disk still full and the turn still open
    listed = _nexus(env, "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "main" in listed.stdout and "Traceback" not in listed.stderr, listed.stderr
    assert f"is open: its reply is kept in {rescue}" in listed.stderr, "the listing says where the open turn's reply is"

    (small_disk / "filler").unlink()
    history = _nexus(env, "sessions", "history", "main")
    assert history.returncode == 0, history.stderr
    assert REPLY in history.stdout
    assert not rescue.exists(), "the rescue file is removed once its turn is in the ledger"
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
    assert [t.status for t in turns] == ["completed", "completed"]


def test_chat_goes_on_after_a_turn_the_full_disk_refused(small_disk: Path, tmp_path: Path) -> None:
    """The next chat turn puts the refused turn in the ledger first (from its rescue file): no fork."""
    home, tmp = small_disk / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    full = threading.Event()  # the reply stalls until the disk is full, however slow the machine
    steps = [text("one"), stall(after_chunks=2, seconds=120, then=text(REPLY), release=full), text("three")]
    with FakeProviderServer(*steps) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
        chat = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "chat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert chat.stdin is not None and chat.stderr is not None
        try:
            chat.stdin.write("tell me a long story\n")
            chat.stdin.flush()
            deadline = time.monotonic() + 60
            while len(server.requests) < 2:
                assert chat.poll() is None and time.monotonic() < deadline, chat.communicate()
                time.sleep(0.05)
            fill(small_disk / "filler")
            full.set()
            while "could not save turn" not in (line := chat.stderr.readline()):
                assert line, "chat ended before reporting the refused turn"
            (small_disk / "filler").unlink()  # room again: the chat goes on
            out, err = chat.communicate("and then?\n", timeout=120)
        finally:
            if chat.poll() is None:
                chat.kill()
                chat.communicate()
    assert chat.returncode == 0, err
    assert "Traceback" not in err and "is in the ledger now" in err, err
    assert REPLY in out and "three" in out
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert run_inline(ledger.turns.open_turns()) == []
    assert [t.status for t in turns] == ["completed", "completed", "completed"]
    assert turns[2].parent_turn_id == turns[1].id, "the chat's next turn follows the refused one"


def test_a_disk_already_full_is_named_full_not_damaged_nor_read_only(small_disk: Path, tmp_path: Path) -> None:
    """A stranger's trial filled the disk under a whole ledger: ``nexus db check`` called it DAMAGED and
    advised restoring a backup, ``nexus run`` pointed at permissions and ``lsattr`` (SQLite says "disk I/O
    error" when its shared-memory index cannot grow). Both now say the disk is full; nothing is lost."""
    home, tmp = small_disk / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    with FakeProviderServer(text("one"), text("two")) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
        fill(small_disk / "fill")
        try:
            checked = _nexus(env, "db", "check")
            ran = _nexus(env, "run", "-s", "later", "second")
        finally:
            (small_disk / "fill").unlink()
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    out = checked.stdout + checked.stderr
    assert "DAMAGED" not in out and "restore a backup" not in out, out
    assert "NOT CHECKED" in out and "is full" in out and "free some space" in out.lower(), out
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "is full" in ran.stderr and "free some space" in ran.stderr and "lsattr" not in ran.stderr, ran.stderr
    assert _nexus(env, "db", "check").returncode == 0  # with room again it reads, and is whole
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.status for t in run_inline(ledger.turns.path("main"))] == ["completed"]
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["main"]  # no empty "later" left


def test_output_redirected_to_a_full_disk_is_one_error_line(small_disk: Path, tmp_path: Path) -> None:
    """``nexus sessions list > full/x`` printed a traceback (a stranger's trial): now one line, exit 1."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    with FakeProviderServer(text("one")) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
    fill(small_disk / "fill")
    for args in (("sessions", "list"), ("sessions", "history", "main"), ("sessions", "export", "main")):
        with open(small_disk / "out.txt", "w", encoding="utf-8") as out:
            done = subprocess.run(
                [sys.executable, "-m", "nexus.cli", *args], stdout=out, stderr=subprocess.PIPE, text=True, env=env,
                timeout=120, check=False,
            )  # fmt: skip
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert "cannot write the output (stdout): No space left on device" in done.stderr, (args, done.stderr)


def test_an_open_on_a_full_disk_says_it_cannot_open_not_write(small_disk: Path, tmp_path: Path) -> None:
    """`nexus sessions list` said "cannot write to the ledger" for a read: SQLite must create the WAL's
    index file beside the database to open it, which a full disk refuses. (A reading command now reads
    the file alone instead: test_read_full_disk.py; a writing one still cannot open it.)"""
    home, tmp = small_disk / "home", tmp_path / "tmp"
    tmp.mkdir()
    home.mkdir()
    with Ledger.open(home / "agents.db"):  # a clean close removes the WAL and its index
        pass
    fill(small_disk / "filler")
    listed = _nexus(_env(home, tmp), "agents", "add", "coder")
    assert listed.returncode == 1, listed.stderr
    assert f"cannot open the ledger {home / 'agents.db'}" in listed.stderr, listed.stderr
    assert "agents.db-shm" in listed.stderr and "free some space" in listed.stderr
    assert "Traceback" not in listed.stderr
