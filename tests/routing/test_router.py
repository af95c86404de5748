"""The router on a real ledger: what it decides, and what it does with bad input."""

from __future__ import annotations

import asyncio
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


async def test_on_postgresql_a_turn_closed_late_or_out_of_order_is_indexed(postgres_url: str) -> None:
    """Turns have no row number there: the watermark is a completion time, and turns completed a little before
    it (a close that committed late) or opened long ago and closed now are still found."""
    from nexus.llm.types import AssistantMessage, TextContent, UserMessage

    opened = await Ledger.connect(postgres_url)
    router = await asyncio.to_thread(Router, opened, embedder=None)
    try:
        await opened.sessions.create(NewSession("search", metadata={"agent": "finder"}))
        long_open = await opened.turns.open(TurnOpen("search", [UserMessage("add fuzzy matching")], TurnDetails()))
        first = await _pg_turn(opened, "ops", "Alert when the API error rate passes 2 percent", NOW_MS)
        assert await asyncio.to_thread(router.catch_up) == 1
        late = await _pg_turn(opened, "cache", "Cache the exchange rates for an hour", NOW_MS - 60_000)
        reply = [AssistantMessage([TextContent("fuzziness AUTO on product names")])]
        await opened.turns.write(TurnWrite("search", long_open, response_messages=reply, completed_at=NOW_MS + 5))
        assert await asyncio.to_thread(router.catch_up) == 2
        rows = {r.turn_id: r for r in await asyncio.to_thread(router.store.rows, list(range(1, 10)))}
        assert set(rows) == {first, late, long_open}
        assert rows[long_open].agent_id == "finder"
        assert await asyncio.to_thread(router.catch_up) == 0
    finally:
        await asyncio.to_thread(router.close)
        await opened.aclose()


async def test_on_postgresql_a_turn_holding_a_nul_is_indexed_and_routing_goes_on(postgres_url: str) -> None:
    """A turn may hold a NUL (the ledger keeps it, JSON-escaped; the chat-completions door takes one): the index's
    text columns could not, so indexing it failed, and with it every later decision on that database."""
    opened = await Ledger.connect(postgres_url)
    router = await asyncio.to_thread(Router, opened, embedder=None)
    try:
        held = await _pg_turn(opened, "nul", "Rotate the signing\x00key of the webhook service", NOW_MS - 2000)
        invoice = await _pg_turn(opened, "billing", "Generate a PDF invoice when an order is paid", NOW_MS - 1000)
        assert await asyncio.to_thread(router.catch_up) == 2
        found = await asyncio.to_thread(lambda: router.route("pdf invoice for paid orders"))
        assert found.checkpoint is not None and found.checkpoint.turn_id == invoice
        rotated = await asyncio.to_thread(lambda: router.route("rotate the webhook signing key", record=False))
        assert rotated.checkpoint is not None and rotated.checkpoint.turn_id == held
        assert "\x00" not in rotated.checkpoint.context
    finally:
        await asyncio.to_thread(router.close)
        await opened.aclose()


async def _pg_turn(ledger: Ledger, label: str, ask: str, completed_at: int) -> str:
    from nexus.llm.types import AssistantMessage, TextContent, UserMessage

    await ledger.sessions.ensure(NewSession(label))
    answer = [AssistantMessage([TextContent("done")])]
    details = TurnDetails(started_at=completed_at - 1000)
    write = TurnWrite(label, None, query_messages=[UserMessage(ask)], response_messages=answer,  # type: ignore[arg-type]
                      completed_at=completed_at, details=details)  # fmt: skip
    return await ledger.turns.write(write)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_two_routers_on_one_database_share_the_index(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two processes (two brokers on one PostgreSQL database, or `nexus serve` and `nexus route` on one file):
    what one indexed, the other's next decision knows; both indexing the same turns at once is no error."""
    if backend == "sqlite":
        one, two = Ledger.open(tmp_path / "agents.db"), Ledger.open(tmp_path / "agents.db")
    else:
        url = request.getfixturevalue("postgres_url")
        one, two = await Ledger.connect(url), await Ledger.connect(url)
    first = await asyncio.to_thread(Router, one, embedder=None)
    second = await asyncio.to_thread(Router, two, embedder=None)
    try:
        limiter = await _pg_turn(one, "auth", "Add rate limiting to the login endpoint", NOW_MS - 2000)
        both = await asyncio.to_thread(second.store.pending_turns, 64)  # the second sees it pending, too
        assert await asyncio.to_thread(first.catch_up) == 1
        await asyncio.to_thread(second.indexer._add, both)  # and stores it after the first did
        invoice = await _pg_turn(one, "billing", "Generate a PDF invoice when an order is paid", NOW_MS - 1000)
        assert await asyncio.to_thread(first.catch_up) == 1
        found = await asyncio.to_thread(lambda: second.route("pdf invoice for paid orders", record=False))
        assert found.checkpoint is not None and found.checkpoint.turn_id == invoice
        assert await asyncio.to_thread(second.store.count) == 2 and len(second.index) == 2
        stored = await asyncio.to_thread(second.store.rows, list(range(1, 10)))
        assert {r.turn_id for r in stored} == {limiter, invoice}
        assert sorted(second.index.row_of(r.id) for r in stored) == [0, 1]  # type: ignore[type-var]
    finally:
        for router, ledger in ((first, one), (second, two)):
            await asyncio.to_thread(router.close)
            if backend == "sqlite":
                ledger.close()
            else:
                await ledger.aclose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_nul_in_a_task_reads_as_a_space_on_both_backends(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL's text cannot hold NUL (the decision's record failed there with a database error); it was then
    refused on both, while a message's content may hold one (every door takes it): it now reads as a space."""
    if backend == "sqlite":
        ledger = Ledger.open(tmp_path / "agents.db")
    else:
        ledger = await Ledger.connect(request.getfixturevalue("postgres_url"))
    router = await asyncio.to_thread(Router, ledger, embedder=None)
    try:
        await _pg_turn(ledger, "auth", "Add rate limiting to the login endpoint", NOW_MS - 2000)
        with_nul = await asyncio.to_thread(router.route, "rate lim\x00it the login")
        plain = await asyncio.to_thread(router.route, "rate lim it the login")
        assert with_nul.decision_id is not None and with_nul.mode == plain.mode
        assert with_nul.checkpoint == plain.checkpoint and with_nul.confidence == pytest.approx(plain.confidence)
        recorded = {d.id: d.task for d in await asyncio.to_thread(router.decisions.decisions)}
        assert recorded[with_nul.decision_id] == "rate lim it the login"
        with pytest.raises(RoutingError, match="the task is empty"):
            await asyncio.to_thread(router.route, "\x00 \x00")
    finally:
        await asyncio.to_thread(router.close)
        if backend == "sqlite":
            ledger.close()
        else:
            await ledger.aclose()
