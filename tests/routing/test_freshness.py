"""Freshness: a checkpoint whose files changed on disk counts less; its own continuation does not stale it."""

from __future__ import annotations

from pathlib import Path

from nexus.ledger import Ledger
from nexus.routing import Router

from ._ledgers import DAY_MS, NOW_MS, turn


def _fresh(router: Router, turn_id: str) -> float:
    from nexus.routing._files import freshness

    rows = router.store.rows(list(range(1, 50)))
    return freshness(next(r for r in rows if r.turn_id == turn_id).files)


def test_a_file_changed_outside_the_work_makes_it_stale(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    with Ledger.open(tmp_path / "agents.db") as ledger, Router(ledger) as router:
        done = turn(ledger, "a", "Make the importer stream its CSV", "importer/cli.py streams rows",
                    writes=("importer/cli.py", "importer/rows.py"), workspace=ws)  # fmt: skip
        router.catch_up()
        assert _fresh(router, done) == 1.0
        (ws / "importer/cli.py").write_text("someone else's rewrite\n", encoding="utf-8")
        assert _fresh(router, done) == 0.5
        (ws / "importer/rows.py").unlink()
        assert _fresh(router, done) == 0.0


def test_a_later_turn_of_the_same_thread_refreshes_its_ancestors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    with Ledger.open(tmp_path / "agents.db") as ledger, Router(ledger) as router:
        first = turn(ledger, "a", "Write the retry helper", "retry.py with backoff", writes=("retry.py",),
                     workspace=ws, at_ms=NOW_MS - DAY_MS)  # fmt: skip
        router.catch_up()
        turn(ledger, "a", "Add jitter to the retry helper", "retry.py now adds jitter", writes=("retry.py",),
             workspace=ws, at_ms=NOW_MS - DAY_MS + 1000)  # fmt: skip
        router.catch_up()
        assert _fresh(router, first) == 1.0  # rewritten by its own continuation: not stale
        other = turn(ledger, "b", "Unrelated: rewrite retry.py from scratch", "new retry.py", writes=("retry.py",),
                     workspace=ws, at_ms=NOW_MS)  # fmt: skip
        router.catch_up()
        assert _fresh(router, first) == 0.0  # another branch rewrote it
        assert _fresh(router, other) == 1.0


def test_stale_work_loses_to_the_same_work_whose_files_are_intact(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger, Router(ledger) as router:
        kept = turn(ledger, "main", "Add a CONCURRENTLY built index on orders for customer and date",
                    "migration 0107 builds the index concurrently", writes=("db/0107_orders_idx.sql",),
                    workspace=tmp_path / "main", at_ms=NOW_MS - 10 * DAY_MS)  # fmt: skip
        reset = turn(ledger, "wt", "Add an index on orders for customer and date, built CONCURRENTLY",
                     "migration 0107 builds the index concurrently", writes=("db/0107_orders_idx.sql",),
                     workspace=tmp_path / "wt", at_ms=NOW_MS - 2 * DAY_MS)  # fmt: skip
        router.catch_up()
        (tmp_path / "wt/db/0107_orders_idx.sql").write_text("-- reset to main\n", encoding="utf-8")
        after = router.route("continue the concurrent orders index migration", now_ms=NOW_MS, record=False)
    assert {s.checkpoint.turn_id for s in after.scored[:2]} == {kept, reset}
    assert after.checkpoint is not None and after.checkpoint.turn_id == kept
    assert after.scored[0].signals["fresh"] == 1.0 and after.scored[1].signals["fresh"] == 0.0
