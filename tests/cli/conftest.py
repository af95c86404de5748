"""Fixtures for CLI tests: run ``python -m nexus.cli`` as a real subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.testing import FakeProviderServer

from .cli_process import RunNexus, run_nexus
from .fake_config import write_fake_config


@pytest.fixture
def nexus(isolated_env: Path) -> RunNexus:
    """``nexus(*args, env=..., stdin=...)`` runs the CLI with the test's NEXUS_HOME and no provider keys."""
    return run_nexus


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
