"""The conformance suite tells required from optional: a backend lacking an optional store skips its tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from nexus.ledger import Ledger
from nexus.testing.conformance import OPTIONAL, REQUIRED, has
from nexus.testing.conformance.support import need


class _TurnsWithoutTree:
    """The required ``TurnStore`` half of a turn store, and nothing of ``TurnTree``."""

    def __init__(self, turns: Any) -> None:
        for name in ("open", "journal", "write", "recover", "open_turns", "get", "history", "history_at", "path"):
            setattr(self, name, getattr(turns, name))
        for name in ("messages", "tool_calls", "compaction"):
            setattr(self, name, getattr(turns, name))


@dataclass
class _MinimalLedger:
    """What a third backend may offer: the three required stores only."""

    turns: Any
    sessions: Any
    queue: Any


def test_a_ledger_with_only_the_required_stores_has_no_optional_capability() -> None:
    with Ledger.open(":memory:") as full:
        assert all(has(full, capability) for capability in OPTIONAL)
        minimal = _MinimalLedger(_TurnsWithoutTree(full.turns), full.sessions, full.queue)
        assert not has(minimal, "tree") and not has(minimal, "agents") and not has(minimal, "deliveries")  # type: ignore[arg-type]
        assert has(minimal, "pointer_log") and has(minimal, "queue_feed")  # type: ignore[arg-type]
        with pytest.raises(pytest.skip.Exception, match="optional capability not implemented: tree, agents"):
            need(minimal, "tree", "agents")  # type: ignore[arg-type]
        need(full, *OPTIONAL)  # a ledger with every capability runs every test
    assert REQUIRED == ("turns", "sessions", "queue")
