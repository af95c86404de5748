"""``nexus serve --port 0`` as a real process for the tests: started, waited for until it announces itself."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serving(env: dict[str, str], announced: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``nexus serve --port 0`` with ``env``; yields the process and its URL once ``announced`` (its server.json)
    names the port. Killed at the end if still running."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "serve", "--port", "0", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not announced.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "nexus serve did not announce itself"
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{json.loads(announced.read_text())['port']}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
