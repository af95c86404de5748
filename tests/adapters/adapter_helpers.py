"""Helpers for adapter tests: config builders and the paths of the test adapter scripts.

The scripts in ``scripts/`` are real executables (Python, stdlib only) started as real
processes; each one misbehaves in one way so a test can show Nexus's reaction.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

from nexus.adapters.manager import AdapterManager
from nexus.config import AdapterConfig
from nexus.streaming.events import StreamEvent

SCRIPTS = Path(__file__).parent / "scripts"

MakeManager = Callable[..., AdapterManager]


def script_command(name: str, *args: str) -> str:
    """The ``command = "..."`` of a test adapter script, run with this interpreter."""
    return " ".join([sys.executable, str(SCRIPTS / name), *args])


def adapter(**fields: Any) -> AdapterConfig:
    return AdapterConfig.model_validate(fields)


async def events_of(items: Iterable[StreamEvent]) -> AsyncIterator[StreamEvent]:
    for item in items:
        yield item
