"""Every command that hosts the broker refuses, with the same one line, while another process holds its lock."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from nexus.cli._lock import LOCK_HELD

from .cli_process import RunNexus


@pytest.mark.parametrize(
    "argv", [["serve", "--port", "0"], ["adapters", "monitor"], ["queue", "drain"]], ids=["serve", "monitor", "drain"]
)
def test_a_second_broker_host_is_refused_with_one_line(isolated_env: Path, nexus: RunNexus, argv: list[str]) -> None:
    isolated_env.mkdir()
    (isolated_env / "nexus.toml").write_text(
        '[agents.helper]\n\n[adapters.inbox]\ncommand = "true"\n\n'
        '[adapters.inbox.accounts.main]\nmonitor = true\nagent = "helper"\n',
        encoding="utf-8",
    )
    lock = os.open(isolated_env / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # "a running nexus serve"
    try:
        refused = nexus(*argv)
    finally:
        os.close(lock)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [f"nexus: error: {LOCK_HELD}"]
    assert not (isolated_env / "server.json").exists()
