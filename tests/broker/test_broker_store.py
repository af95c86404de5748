"""The broker's durable rows: registry, idempotent accept, attempts, delivery in a caller's transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, LedgerError, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("agent:worker")))
        yield opened


@pytest.fixture
def store(ledger: Ledger) -> BrokerStore:
    return BrokerStore(ledger.database)


def accept(store: BrokerStore, message_id: str, *, sender: str | None = "user", log: bool = False) -> tuple[str, bool]:
    item, created = store.accept(
        agent_id="worker",
        session_label="agent:worker",
        message_id=message_id,
        sender=sender,
        message={"content": f"text of {message_id}", "conversation_id": "conv-1"},
        mode="followup",
        log_as_agent_message=log,
    )
    return item.id, created


def test_registry_survives_reopen(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        store = BrokerStore(ledger.database)
        saved = store.save_agent("manager", role="manager", session_label="agent:manager", spec={"model": "m"})
        assert saved.spec == {"model": "m"} and saved.status == "active"
        store.save_agent("worker", role="worker", session_label="agent:worker", spec={})
        assert store.remove_agent("worker") and not store.remove_agent("worker")
    with Ledger.open(tmp_path / "a.db") as ledger:
        store = BrokerStore(ledger.database)
        assert [a.agent_id for a in store.list_agents()] == ["manager"]
        assert store.get_agent("worker") is None
        back = store.save_agent("worker", role="worker", session_label="agent:worker", spec={"x": 1})
        assert back.status == "active" and back.spec == {"x": 1}


def test_accept_is_idempotent_on_the_message_id(store: BrokerStore) -> None:
    first, created = accept(store, "m-1")
    again, created_again = accept(store, "m-1")
    assert created and not created_again and first == again
    assert [item.message_id for item in store.pending("worker")] == ["m-1"]


def test_agent_messages_are_logged_with_the_queue_row(ledger: Ledger, store: BrokerStore) -> None:
    accept(store, "m-1", sender="manager", log=True)
    accept(store, "m-1", sender="manager", log=True)  # a redelivery logs nothing twice
    rows = ledger.database.connection.execute("SELECT id, from_agent, to_agent, content FROM broker_messages")
    assert rows.fetchall() == [("m-1", "manager", "worker", "text of m-1")]


def test_claim_counts_attempts_and_exhausted_items_fail_with_a_reason(store: BrokerStore) -> None:
    item_id, _ = accept(store, "m-1")
    for _ in range(3):
        store.claim([item_id])  # three runs, each cut by a crash
    failed = store.fail_exhausted(max_attempts=3)
    assert [f.id for f in failed] == [item_id]
    (row,) = store.items(agent_id="worker")
    assert row.status == "failed" and row.attempts == 3 and "cut 3 times" in (row.error or "")
    assert store.pending() == []


def test_release_puts_an_item_back_without_losing_its_place(store: BrokerStore) -> None:
    ids = [accept(store, f"m-{n}")[0] for n in range(3)]
    store.claim(ids[:1])
    store.release(ids[:1])
    assert [item.id for item in store.pending()] == ids
    assert store.pending()[0].status == "queued" and store.pending()[0].attempts == 0


def test_deliver_joins_the_callers_transaction(ledger: Ledger, store: BrokerStore) -> None:
    item_id, _ = accept(store, "m-1")
    store.claim([item_id])

    def turn_fails(conn: object) -> None:
        store.deliver([item_id], "turn-x", conn=conn)  # type: ignore[arg-type]
        raise RuntimeError("the turn's own write failed")

    with pytest.raises(RuntimeError):
        ledger.database.write(turn_fails)
    assert store.pending()[0].status == "processing"  # rolled back with the turn
    ledger.database.write(lambda conn: store.deliver([item_id], "turn-x", conn=conn))
    (row,) = store.items(statuses=["delivered"])
    assert row.turn_id == "turn-x" and row.completed_at is not None


def test_a_finished_item_is_never_moved_again(store: BrokerStore) -> None:
    item_id, _ = accept(store, "m-1")
    store.claim([item_id])
    store.deliver([item_id], "turn-1")
    with pytest.raises(LedgerError, match=r"already finished or unknown.*delivered"):
        store.deliver([item_id], "turn-2")
    with pytest.raises(LedgerError, match="missing"):
        store.claim(["no-such-item"])
    (row,) = store.items()
    assert row.turn_id == "turn-1"


def test_drop_and_fail_keep_the_reason(store: BrokerStore) -> None:
    a, _ = accept(store, "m-1")
    b, _ = accept(store, "m-2")
    store.drop([a], "cap 20 reached (policy old)")
    store.fail([b], "agent removed")
    rows = {row.id: row for row in store.items()}
    assert (rows[a].status, rows[a].error) == ("dropped", "cap 20 reached (policy old)")
    assert (rows[b].status, rows[b].error) == ("failed", "agent removed")


def test_write_turn_marks_consumed_items_in_its_own_transaction(ledger: Ledger, store: BrokerStore) -> None:
    from nexus.llm.types import AssistantMessage, TextContent, UserMessage

    item_id, _ = accept(store, "m-1")
    done_id, _ = accept(store, "m-2")
    store.claim([item_id, done_id])
    store.deliver([done_id], "an-earlier-turn")
    turn_id = run_inline(
        ledger.turns.write(
            TurnWrite(
                "agent:worker",
                None,
                query_messages=[UserMessage("text of m-1")],
                response_messages=[AssistantMessage(content=[TextContent("ok")])],
                consumed_queue_items=[item_id, done_id],
            )
        )
    )
    rows = {row.id: row for row in store.items()}
    assert (rows[item_id].status, rows[item_id].turn_id) == ("delivered", turn_id)
    assert rows[done_id].turn_id == "an-earlier-turn"  # a finished item is left alone, the turn still written
    assert run_inline(ledger.turns.get(turn_id)).status == "completed"


def test_queued_after_skips_the_rows_the_caller_holds_but_still_moves_past_them(store: BrokerStore) -> None:
    """The store watcher names the rows its broker already holds: only the others are parsed and returned."""
    start = store.last_rowid()
    own, _ = accept(store, "m-own")
    other, _ = accept(store, "m-other")
    asked: list[tuple[str, str, str]] = []

    def held(agent_id: str, session_label: str, item_id: str) -> bool:
        asked.append((agent_id, session_label, item_id))
        return item_id == own

    items, newest = store.queued_after(start, held)
    assert [item.id for item in items] == [other] and items[0].content == "text of m-other"
    assert newest == store.last_rowid() and asked == [
        ("worker", "agent:worker", own),
        ("worker", "agent:worker", other),
    ]
    assert [item.id for item in store.queued_after(start)[0]] == [own, other]  # no predicate: every queued row


def test_queued_after_hands_no_finished_row_to_python_but_moves_past_it(store: BrokerStore) -> None:
    """A busy broker's poll: finished rows are filtered by SQLite, never fetched (they were, 2,500 a poll)."""
    start = store.last_rowid()
    done, _ = accept(store, "m-done")
    store.claim([done])
    store.deliver([done], "turn-1")
    waiting, _ = accept(store, "m-waiting")
    dropped, _ = accept(store, "m-dropped")
    store.drop([dropped], "cleared")
    fetched: list[str] = []
    conn = store.database.connection
    conn.set_trace_callback(fetched.append)
    asked: list[str] = []
    items, newest = store.queued_after(start, lambda agent, label, item_id: bool(asked.append(item_id)))
    conn.set_trace_callback(None)
    assert [item.id for item in items] == [waiting] and asked == [waiting]
    assert newest == store.last_rowid()
    assert store.queued_after(newest) == ([], newest)
    poll = next(sql for sql in fetched if sql.startswith("SELECT rowid,"))  # as run, parameters bound
    assert [row[1] for row in conn.execute(poll).fetchall()] == [waiting]  # the rows Python received


def test_queued_after_reads_whole_rows_only_of_those_not_held(store: BrokerStore) -> None:
    """A broker that fell behind has thousands of its own rows still queued at each poll: only their keys
    are read (whole rows, message JSON included, cost 3-5 ms of the event loop a poll at 2,500)."""
    start = store.last_rowid()
    ids = [accept(store, f"m-{n}")[0] for n in range(600)]  # more than one IN list's worth
    statements: list[str] = []
    conn = store.database.connection
    conn.set_trace_callback(statements.append)
    items, _ = store.queued_after(start, lambda agent, label, item_id: True)
    assert items == [] and not any("message_json" in sql for sql in statements)
    statements.clear()
    items, newest = store.queued_after(start, lambda agent, label, item_id: item_id != ids[3])
    conn.set_trace_callback(None)
    assert [item.id for item in items] == [ids[3]] and newest == store.last_rowid()
    assert sum("message_json" in sql for sql in statements) == 1
    every = store.queued_after(start)[0]  # no predicate: every queued row, in order, over two IN lists
    assert [item.id for item in every] == ids
