"""Fixtures for CLI tests: run ``python -m nexus.cli`` as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_config import write_fake_config

from nexus.testing import FakeProviderServer

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


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    """A loopback fake provider, stopped after the test."""
    with FakeProviderServer() as fake:
        yield fake


@pytest.fixture
def home(isolated_env: Path, server: FakeProviderServer) -> Path:
    """NEXUS_HOME with a nexus.toml pointing the default model at ``server``."""
    write_fake_config(isolated_env, server)
    return isolated_env
