"""Fixtures for the coding-tool tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.tools import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """A fresh workspace root (``tmp_path/ws``), with ``tmp_path`` itself outside it."""
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)
