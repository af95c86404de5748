"""Commands that rewrite a file keep what the file is: its mode, owner, symlink, or its being a device.

A stranger's trial: ``nexus mcp add`` turned a 0600 ``nexus.toml`` holding an API key into 0644 (every
local user could read the key) and a symlinked one into a copy; ``nexus sessions export -o /dev/full``
as root replaced the device with a regular file; an export onto a symlink replaced the link.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import qa_turn

SRC = Path(__file__).resolve().parents[2] / "src"
SECRET_CONFIG = 'default_model = "openai/gpt-4o-mini"\n\n[providers.openai]\napi_key = "sk-not-for-others"\n'


def _nexus(home: Path, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True, timeout=120,
        check=False, umask=umask,
    )  # fmt: skip


def test_a_config_edit_keeps_the_files_mode_and_writes_through_its_symlink(tmp_path: Path) -> None:
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    home.mkdir()
    dotfiles.mkdir()
    real = dotfiles / "nexus.toml"
    real.write_text(SECRET_CONFIG, encoding="utf-8")
    real.chmod(0o600)
    (home / "nexus.toml").symlink_to(real)
    done = _nexus(home, "mcp", "add", "fs", "--command", "true", "--no-check")
    assert done.returncode == 0, done.stderr
    assert (home / "nexus.toml").is_symlink()  # still the link: the dotfiles repository sees the change
    assert "[mcp" in real.read_text(encoding="utf-8") and "sk-not-for-others" in real.read_text(encoding="utf-8")
    assert stat.S_IMODE(real.stat().st_mode) == 0o600  # not 0644 under umask 022: the key stays private
    assert [p.name for p in dotfiles.iterdir()] == ["nexus.toml"]  # no temporary file left


def test_a_new_config_file_made_by_an_edit_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _nexus(home, "mcp", "add", "fs", "--command", "true", "--no-check")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((home / "nexus.toml").stat().st_mode) == 0o600


def _home_with_a_session(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(qa_turn(ledger, "s", "hello", "hi there"))
    return home


def test_export_writes_into_a_fifo_instead_of_replacing_it(tmp_path: Path) -> None:
    home = _home_with_a_session(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    done = _nexus(home, "sessions", "export", "s", "-o", str(fifo))
    if not received:  # the export did not open the FIFO (it renamed a file over it): let the reader go
        with open(fifo, "w", encoding="utf-8"):
            pass
    reader.join(10)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced by a regular file"
    assert '"hi there"' in received[0]


def test_export_onto_a_symlink_or_an_existing_file_keeps_link_and_mode(tmp_path: Path) -> None:
    home = _home_with_a_session(tmp_path)
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("keep me?\n", encoding="utf-8")
    real.chmod(0o644)
    link.symlink_to(real)
    assert _nexus(home, "sessions", "export", "s", "-o", str(link)).returncode == 0
    assert link.is_symlink() and '"hi there"' in real.read_text(encoding="utf-8")
    assert stat.S_IMODE(real.stat().st_mode) == 0o644
    fresh = tmp_path / "fresh.jsonl"
    assert _nexus(home, "sessions", "export", "s", "-o", str(fresh), umask=0o027).returncode == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # a new file: 0666 less the umask, as any program makes


def test_a_config_edit_refuses_a_config_that_is_not_a_regular_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    device = tmp_path / "null"  # a private /dev/null: the trial's case without touching the real one
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    done = _nexus(tmp_path, "--config", str(device), "mcp", "add", "fs", "--command", "true", "--no-check")
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert stat.S_ISCHR(device.lstat().st_mode)
