"""Fixtures of the server tests: a seeded ledger and live uvicorn servers over it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger

from .live import LiveServer, run_server, seed_ledger
from .ui_browser import chromium, page  # noqa: F401  (the browser tests' fixtures)


@pytest.fixture
def seeded_ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        seed_ledger(ledger)
        yield ledger


@pytest.fixture
def live(seeded_ledger: Ledger) -> Iterator[Callable[..., LiveServer]]:
    """A factory: ``live(ServerConfig(...))`` starts a server (stopped after the test)."""
    with ExitStack() as stack:

        def start(config: ServerConfig | None = None) -> LiveServer:
            return stack.enter_context(run_server(seeded_ledger, config))

        yield start
