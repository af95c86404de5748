"""What every conformance module shares: the ``backend`` fixture, the backends it runs, small turn writers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import reply, user

from nexus.ledger import CompactionRecord, Ledger, LedgerBackend

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "pi-sessions"
if not FIXTURES.exists():
    FIXTURES = Path("/work/shared/fixtures/pi-sessions")

BACKENDS: dict[str, Callable[[Path], LedgerBackend]] = {
    "sqlite-memory": lambda tmp: Ledger.open(":memory:"),
    "sqlite-file": lambda tmp: Ledger.open(tmp / "agents.db"),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerBackend]:
    """A fresh, empty ledger of each registered backend."""
    ledger = BACKENDS[request.param](tmp_path)
    yield ledger
    ledger.close()


def qa_turn(ledger: LedgerBackend, session: str, q: str, a: str, **kw: object) -> str:
    """Write a finished turn: one user question, one assistant answer."""
    return ledger.write_turn(None, session, query_messages=[user(q)], response_messages=[reply(a)], **kw)  # type: ignore[arg-type]


def compact_turn(backend: LedgerBackend, session: str, through: str, first_kept: str | None, **kw: object) -> str:
    """Write a compaction turn summarising up to ``through`` and keeping turns from ``first_kept``."""
    record = CompactionRecord(
        summary="they talked about 1 and 2",
        summarized_through_turn_id=through,
        first_kept_turn_id=first_kept,
        turns_summarized=2,
        model="cheap-model",
        tokens_before=1000,
        tokens_after=200,
        trigger="context_limit",
    )
    return backend.write_turn(None, session, compaction=record, **kw)  # type: ignore[arg-type]
