"""Fixtures for CLI tests: run ``python -m nexus.cli`` as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

RunNexus = Callable[..., subprocess.CompletedProcess[str]]


def _run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=120,
        check=False,
    )


@pytest.fixture
def nexus(isolated_env: Path) -> RunNexus:
    """``nexus(*args, env=..., stdin=...)`` runs the CLI with the test's NEXUS_HOME and no provider keys."""
    return _run
