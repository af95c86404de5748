"""The in-memory BM25 stage: it scores as SQLite's FTS5 does, and a router that loads the index finds the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.routing import Router
from nexus.routing._lexical import COLUMN_WEIGHTS, Postings, columns_of
from nexus.routing._words import query_terms, stem

from ._ledgers import NOW_MS, corpus

ROWS = [
    ("Add rate limiting to the login endpoint", "Added a sliding window limiter", "auth/ratelimit.py"),
    ("The limiter should key on the username too", "Window key is ip and username", "auth/ratelimit.py"),
    ("Shrink the Docker image with a multi-stage build", "Multi-stage Dockerfile, login to the registry", "Dockerfile"),
    ("Generate a PDF invoice when an order is paid", "Renders the invoice with WeasyPrint", "billing/invoice.py"),
    ("Cache the invoice totals", "Totals cached per order; the login page is unchanged", "billing/cache.py"),
    ("login login login", "", ""),
]


def _fts5(rows: list[tuple[str, str, str]], terms: list[str]) -> list[tuple[int, float]]:
    """What FTS5's ``bm25()`` says for the same rows and terms (rows numbered from 0, as the postings are)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(ask, reply, files, content='', tokenize='unicode61')")
    for i, row in enumerate(rows):
        db.execute("INSERT INTO t (rowid, ask, reply, files) VALUES (?, ?, ?, ?)", (i + 1, *row))
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    query = " OR ".join(f'"{t}"' for t in terms)
    found = db.execute(
        f"SELECT rowid, bm25(t, {weights}) AS s FROM t WHERE t MATCH ? ORDER BY s, rowid", (query,)
    ).fetchall()
    return [(int(r) - 1, -float(s)) for r, s in found]


@pytest.mark.parametrize("text", ["login", "invoice order", "limiting username docker", "nowhere"])
def test_scores_are_fts5_bm25(text: str) -> None:
    terms = query_terms(text)
    rows = [columns_of(*row) for row in ROWS]
    postings = Postings()
    for i, row in enumerate(rows):
        postings.add(i, row)
    ours = postings.search(terms, 10)
    theirs = _fts5(rows, terms)
    assert [r for r, _ in ours] == [r for r, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], rel=1e-5)


def test_frequencies_and_rows_past_a_snapshot() -> None:
    postings = Postings()
    for i, row in enumerate(ROWS):
        postings.add(i, columns_of(*row))
    postings.add(2, columns_of("docker docker", "", ""))  # a row added twice counts once
    docker = stem("docker")
    found, total = postings.frequencies(["login", docker, "nowher"])
    assert (found, total) == ({"login": 4, docker: 1}, len(ROWS))
    assert [r for r, _ in postings.search(["login"], 10, rows_below=3)] == [0, 2]


def test_a_router_that_loads_the_index_decides_as_the_one_that_built_it(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "agents.db")
    try:
        corpus(ledger, tmp_path / "ws")
        tasks = ["pdf invoices for paid orders", "rate limit logins by user name", "make the docker image smaller"]
        with Router(ledger) as built:
            built.catch_up()
            first = [built.route(t, record=False, now_ms=NOW_MS) for t in tasks]
        with Router(ledger) as loaded:  # a new process: the words come back out of the store
            assert len(loaded.index.postings) == len(loaded.index) == 4
            again = [loaded.route(t, record=False, catch_up=False, now_ms=NOW_MS) for t in tasks]
    finally:
        ledger.close()
    for a, b in zip(first, again, strict=True):
        assert [s.checkpoint.turn_id for s in a.scored] == [s.checkpoint.turn_id for s in b.scored]
        assert a.confidence == pytest.approx(b.confidence)
        assert a.scored[0].signals["lex"] == pytest.approx(b.scored[0].signals["lex"])
