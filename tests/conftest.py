"""Shared fixtures: every test gets its own NEXUS_HOME and no provider keys from the environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

_PROVIDER_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_API_KEY")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point NEXUS_HOME at a temp dir and hide real API keys, so tests never touch the user's state."""
    home = tmp_path / "nexus-home"
    monkeypatch.setenv("NEXUS_HOME", str(home))
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    yield home
