"""The router on a real ledger: what it decides, and what it does with bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession, TurnDetails, TurnOpen, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.routing import Router, RouteSettings, RoutingError

from ._ledgers import NOW_MS, corpus, turn


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    opened = Ledger.open(tmp_path / "agents.db")
    yield opened  # type: ignore[misc]
    opened.close()


def test_a_paraphrase_lands_on_the_newest_turn_of_its_work(ledger: Ledger, tmp_path: Path) -> None:
    ids = corpus(ledger, tmp_path / "ws")
    with Router(ledger) as router:
        result = router.route(
            "carry on with the login rate limiter: count the attempts per username as well", now_ms=NOW_MS
        )
    assert result.mode == "existing"
    assert result.checkpoint is not None and result.checkpoint.turn_id == ids["limiter-user"]
    assert result.checkpoint.session_key == "auth" and result.checkpoint.position == 1
    assert "username" in result.checkpoint.context
    assert 0.0 <= result.confidence <= 1.0 and result.confidence >= result.threshold
    assert ids["limiter-user"] not in [c.turn_id for c in result.alternatives]


def test_a_task_that_fits_nowhere_is_new(ledger: Ledger, tmp_path: Path) -> None:
    corpus(ledger, tmp_path / "ws")
    with Router(ledger) as router:
        result = router.route("write a haiku about autumn leaves in the park", now_ms=NOW_MS)
    assert result.mode == "new"
    assert result.confidence < result.threshold


def test_no_history_is_new_with_confidence_zero(ledger: Ledger) -> None:
    with Router(ledger) as router:
        result = router.route("fix the login test")
    assert (result.mode, result.checkpoint, result.confidence) == ("new", None, 0.0)
    assert result.notes == ["no past work to route to"]


@pytest.mark.parametrize("task", ["", "   \n\t "])
def test_an_empty_task_is_refused_and_nothing_is_recorded(ledger: Ledger, task: str) -> None:
    with Router(ledger) as router:
        with pytest.raises(RoutingError, match="the task is empty"):
            router.route(task)
        assert router.decisions.decisions() == []


def test_a_task_that_is_not_valid_unicode_is_refused_and_the_embedder_stays_up(ledger: Ledger, tmp_path: Path) -> None:
    """A lone surrogate (an undecodable byte) made the embedder fail, which turned embeddings off for every
    task for a minute, and then SQLite raised UnicodeEncodeError recording the decision."""
    ids = corpus(ledger, tmp_path / "ws")
    with Router(ledger) as router:
        with pytest.raises(RoutingError, match=r"the task is not valid Unicode \(a lone surrogate at character 6:"):
            router.route("login \udcff rate limiter", now_ms=NOW_MS)
        assert router.decisions.decisions() == []
        result = router.route(
            "carry on with the login rate limiter: count the attempts per username as well", now_ms=NOW_MS
        )
    assert result.notes == [] and result.checkpoint is not None
    assert result.checkpoint.turn_id == ids["limiter-user"]


def test_an_unknown_agent_is_refused_naming_the_known_ones(ledger: Ledger, tmp_path: Path) -> None:
    from nexus.ledger.broker_store import BrokerStore

    BrokerStore(ledger.database).add_agent("coder", spec={})
    with Router(ledger) as router:
        with pytest.raises(RoutingError, match="unknown agent 'nobody'; known agents: coder"):
            router.route("fix it", agent="nobody")
        assert router.decisions.decisions() == []


def test_a_huge_task_is_cut_and_says_so(ledger: Ledger, tmp_path: Path) -> None:
    corpus(ledger, tmp_path / "ws")
    task = "shrink the docker image " + "and more words " * 2000
    with Router(ledger, RouteSettings(max_task_chars=500)) as router:
        result = router.route(task, now_ms=NOW_MS)
        (recorded,) = router.decisions.decisions()
    assert f"the task is {len(task.strip())} characters; routed on its first 500" in result.notes
    assert len(recorded.task) == 500


def test_a_new_turn_is_routable_at_the_next_decision(ledger: Ledger, tmp_path: Path) -> None:
    corpus(ledger, tmp_path / "ws")
    with Router(ledger) as router:
        assert router.route("tune the kafka consumer lag on clicks", now_ms=NOW_MS).mode == "new"
        added = turn(ledger, "events", "The kafka consumer on the clicks topic lags hours behind",
                     "Batch polling and async commits in ingest/consumer.py", at_ms=NOW_MS - 1000)  # fmt: skip
        result = router.route("tune the kafka consumer lag on clicks", now_ms=NOW_MS)
    assert result.checkpoint is not None and result.checkpoint.turn_id == added


def test_an_open_turn_waits_for_its_close_and_is_indexed_then(ledger: Ledger, tmp_path: Path) -> None:
    from nexus.llm.types import AssistantMessage, TextContent, UserMessage

    corpus(ledger, tmp_path / "ws")
    run_inline(ledger.sessions.create(NewSession("search")))
    opened = run_inline(
        ledger.turns.open(TurnOpen("search", [UserMessage("add fuzzy matching to product search")], TurnDetails()))
    )
    later = turn(ledger, "ops", "Alert when the API error rate passes 2 percent", "A Prometheus rule fires at 2 %")
    with Router(ledger) as router:
        router.catch_up()
        indexed = {row.turn_id for row in router.store.rows(list(range(1, 20)))}
        assert later in indexed and opened not in indexed
        run_inline(
            ledger.turns.write(
                TurnWrite("search", opened, response_messages=[AssistantMessage([TextContent("fuzziness AUTO")])])
            )
        )
        router.catch_up()
        indexed = {row.turn_id for row in router.store.rows(list(range(1, 20)))}
    assert opened in indexed


def test_reindex_rebuilds_the_same_checkpoints(ledger: Ledger, tmp_path: Path) -> None:
    ids = corpus(ledger, tmp_path / "ws")
    with Router(ledger) as router:
        router.catch_up()
        assert router.reindex() == len(ids)
        assert router.store.count() == len(ids)
        result = router.route("pdf invoices for paid orders", now_ms=NOW_MS)
    assert result.checkpoint is not None and result.checkpoint.turn_id == ids["invoice"]


async def test_a_postgresql_ledger_is_refused_clearly(postgres_url: str) -> None:
    opened = await Ledger.connect(postgres_url)
    try:
        with pytest.raises(RoutingError, match="this ledger is on PostgreSQL, for which no route store exists yet"):
            Router(opened)
    finally:
        await opened.aclose()
