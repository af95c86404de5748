"""Fixtures for adapter tests (helpers live in ``adapter_helpers``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import MakeManager

from nexus.adapters.manager import AdapterManager
from nexus.adapters.supervisor import RestartPolicy
from nexus.config import AdapterConfig


@pytest.fixture
async def make_manager(tmp_path: Path) -> AsyncIterator[MakeManager]:
    """Build managers (closed at the end of the test, stopping every process they started)."""
    made: list[AdapterManager] = []

    def build(adapters: dict[str, AdapterConfig], **kwargs: Any) -> AdapterManager:
        kwargs.setdefault("state_dir", tmp_path / "adapter-state")
        kwargs.setdefault("policy", RestartPolicy(stop_grace_s=1.0))
        manager = AdapterManager(adapters, **kwargs)
        made.append(manager)
        return manager

    yield build
    for manager in made:
        await manager.close()
