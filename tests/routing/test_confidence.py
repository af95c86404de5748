"""What the confidence promises (docs/routing.md): a probability that the best checkpoint is where the task
belongs, low when the task shares only a word with it, however few candidates the decision looks at.

The ledger is the outside trial's (session 15): short turns of an echo model (each checkpoint is its request
twice), an agent ``rt`` with three pieces of unrelated work, the lead's work, and two ``nexus run`` sessions
that belong to no agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.routing import Router

from ._ledgers import DAY_MS, NOW_MS, turn

FLUX = "calibrate the quantum flux capacitor of the time machine"
RT = ["quantum chromodynamics lattice gauge", "bake sourdough bread with rye", "fix the login page css on mobile"]


def _session(ledger: Ledger, label: str, agent: str | None, asks: list[str], at_ms: int) -> None:
    run_inline(ledger.sessions.create(NewSession(label, metadata={"agent": agent} if agent else {})))
    for i, ask in enumerate(asks):
        turn(ledger, label, ask, ask, at_ms=at_ms + i * 1000)  # an echo model answers with the request


@pytest.fixture
def router(tmp_path: Path) -> Router:
    ledger = Ledger.open(tmp_path / "agents.db")
    store = BrokerStore(ledger.database)
    store.add_agent("rt", spec={})
    store.add_agent("lead", spec={})
    lead = [
        "the login rate limiter must return 429 JSON, add a test",
        "tune the kubernetes helm chart memory limits",
        "quantum chromodynamics lattice gauge",
        "summarise the release notes for version 2",
        "hello",
        "write unit tests for the parser",
    ]
    _session(ledger, "lead-main", "lead", lead, NOW_MS - 2 * DAY_MS)
    _session(ledger, "run-haiku", None, ["write a haiku about kubernetes pods"], NOW_MS - 2 * DAY_MS)
    _session(ledger, "run-flux", None, [FLUX], NOW_MS - 2 * DAY_MS)
    _session(ledger, "rt-main", "rt", RT, NOW_MS - DAY_MS)
    opened = Router(ledger)
    yield opened  # type: ignore[misc]
    opened.close()
    ledger.close()


def test_one_shared_rare_word_with_one_of_three_checkpoints_is_not_confident(router: Router) -> None:
    # the trial: existing at 0.95 for the QCD turn (threshold 0.29); the task's own words are another session's
    result = router.route(FLUX, agent="rt", now_ms=NOW_MS, record=False)
    assert result.checkpoint is not None and result.checkpoint.context.startswith("quantum chromodynamics")
    assert result.mode == "new"
    assert result.confidence < min(0.2, result.threshold)
    # the same decision over everyone's work finds the task's real home, confidently
    everyone = router.route(FLUX, now_ms=NOW_MS, record=False)
    assert everyone.mode == "existing" and everyone.checkpoint is not None
    assert everyone.checkpoint.session_key == "run-flux" and everyone.confidence > 0.8


def test_the_best_of_the_agents_work_is_not_confident_when_the_tasks_home_is_out_of_scope(router: Router) -> None:
    # the trial: `nexus send --route smart` without an agent skips the agent-less session and forked the lead's
    # helm chart turn at 0.62, a checkpoint at 0.00 in the ranking over everyone's work
    task = "write a haiku about kubernetes"
    everyone = router.route(task, now_ms=NOW_MS, record=False)
    assert everyone.checkpoint is not None and everyone.checkpoint.session_key == "run-haiku"
    assert everyone.mode == "existing"
    agents = router.route(task, agents_only=True, now_ms=NOW_MS, record=False)
    assert agents.checkpoint is not None and agents.checkpoint.session_key == "lead-main"
    assert agents.mode == "new"
    assert agents.confidence < min(0.2, agents.threshold)


@pytest.mark.parametrize(
    ("task", "context"),
    [
        ("more sourdough bread with rye please", "bake sourdough bread with rye"),
        ("fix the login page css on mobile safari", "fix the login page css on mobile"),
    ],
)
def test_a_task_that_continues_the_agents_work_stays_confident(router: Router, task: str, context: str) -> None:
    result = router.route(task, agent="rt", now_ms=NOW_MS, record=False)
    assert result.mode == "existing" and result.confidence > 0.8
    assert result.checkpoint is not None and result.checkpoint.context.startswith(context)


def test_with_only_three_checkpoints_in_the_ledger_one_rare_word_is_not_confident(tmp_path: Path) -> None:
    # no scope to blame here: every candidate is in it, and the task's other words are unknown to the index
    with Ledger.open(tmp_path / "agents.db") as ledger:
        BrokerStore(ledger.database).add_agent("rt", spec={})
        _session(ledger, "rt-main", "rt", RT, NOW_MS - DAY_MS)
        with Router(ledger) as router:
            for agent in ("rt", None):
                result = router.route(FLUX, agent=agent, now_ms=NOW_MS, record=False)
                assert result.mode == "new" and result.confidence < min(0.2, result.threshold)
