"""Run ``python -m nexus.cli`` as a real subprocess on this checkout's sources (``SRC``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

RunNexus = Callable[..., subprocess.CompletedProcess[str]]
"""The ``nexus`` fixture: ``nexus(*args, env=..., stdin=...)`` -> the finished process."""


def run_nexus(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with ``args``, this checkout's sources first on the path and ``env`` on top of ours."""
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
