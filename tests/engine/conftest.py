"""Fixtures shared by the engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh ledger file in the test's temporary directory, closed afterwards."""
    led = Ledger.open(tmp_path / "agents.db")
    yield led
    led.close()
