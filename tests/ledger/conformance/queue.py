"""Durable queue rows: they survive, finish once, and name unknown sessions and items."""

from __future__ import annotations

import pytest

from conformance.common import qa_turn
from nexus.ledger import LedgerBackend, SessionNotFound, TurnNotFound

# --------------------------------------------------------------------------- durable queue rows


def test_conformance_queue_items_survive_and_finish_once(backend: LedgerBackend) -> None:
    backend.create_session("s")
    first = backend.enqueue("s", {"role": "user", "content": "one"}, mode="followup")
    second = backend.enqueue("s", {"role": "user", "content": "two"}, mode="collect", metadata={"event": "e1"})
    assert [i.id for i in backend.pending_queue_items("s")] == [first.id, second.id]
    assert first.status == "queued" and first.message == {"role": "user", "content": "one"}
    running = backend.update_queue_item(first.id, "processing")
    assert running.started_at is not None and running.completed_at is None
    t = qa_turn(backend, "s", "one", "ok")
    done = backend.update_queue_item(first.id, "delivered", turn_id=t)
    assert done.turn_id == t and done.completed_at is not None
    with pytest.raises(Exception, match="already delivered"):
        backend.update_queue_item(first.id, "processing")
    with pytest.raises(Exception, match="queue status must be"):
        backend.update_queue_item(second.id, "lost")
    assert [i.id for i in backend.pending_queue_items()] == [second.id]
    with pytest.raises(SessionNotFound):
        backend.enqueue("missing", "x", mode="followup")
    with pytest.raises(TurnNotFound):
        backend.update_queue_item("01NOPE", "processing")
