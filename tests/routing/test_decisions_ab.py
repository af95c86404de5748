"""Every decision is in the ledger; its outcome is settled from the run; the arms compare with intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.routing import Router, RoutingError
from nexus.routing.ab import arm_for, compare, mean_interval, wilson

from ._ledgers import NOW_MS, corpus, turn


def test_the_arm_of_a_conversation_is_fixed_and_the_share_holds() -> None:
    arms = [arm_for(f"conversation-{i}", 0.3) for i in range(4000)]
    assert arms == [arm_for(f"conversation-{i}", 0.3) for i in range(4000)]
    assert 0.27 < arms.count("smart") / len(arms) < 0.33
    assert arm_for("x", 1.0) == "smart" and arm_for("x", 0.0) == "explicit"


def test_intervals() -> None:
    rate = wilson(8, 10)
    assert rate.value == 0.8 and rate.low is not None and rate.high is not None
    assert 0.44 < rate.low < 0.5 and 0.94 < rate.high < 0.97
    assert wilson(0, 0).value is None and wilson(0, 0).show() == "n/a"
    mean = mean_interval([10.0, 20.0, 30.0])
    assert mean.value == 20.0 and mean.low is not None and mean.low < 20.0 < (mean.high or 0)
    skewed = mean_interval([0.0, 0.0, 51_237.0])  # tokens per task: never below 0, whatever the spread
    assert skewed.low == 0.0 and skewed.high is not None and skewed.high > 17_079


def test_a_decision_is_recorded_settled_from_its_run_and_rated(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ids = corpus(ledger, tmp_path / "ws")
        store = BrokerStore(ledger.database)
        store.add_agent("ops", spec={})
        with Router(ledger) as router:
            result = router.route("shrink the docker image more", now_ms=NOW_MS, conversation_id="c-1")
            assert result.decision_id is not None
            (recorded,) = router.decisions.decisions()
            assert (recorded.task, recorded.decision, recorded.turn_id) == (
                "shrink the docker image more",
                result.mode,
                ids["docker"],
            )
            assert recorded.alternatives[0] == ids["docker"] and recorded.conversation_id == "c-1"
            # the routed message is run: queued, a turn written that consumes it, delivered with it
            run_inline(
                ledger.sessions.create(
                    NewSession("ops~fork", origin="fork", head_turn_id=ids["docker"], routing_key="fork:m-1")
                )
            )
            item, _ = store.accept(agent_id="ops", session_label="ops~fork", message_id="m-1", sender="user",
                                   message={"id": "m-1", "content": "shrink"}, mode="followup")  # fmt: skip
            router.decisions.attach(result.decision_id, "ops~fork", "m-1")
            assert router.decisions.settle() == 0  # not run yet
            done = turn(ledger, "ops~fork", "shrink the docker image more", "Dropped the pip cache layer")
            store.deliver([item.id], done)
            assert router.decisions.settle() == 1
            router.decisions.feedback(result.decision_id, 1, "spot on")
            (settled,) = router.decisions.decisions()
            with pytest.raises(RoutingError, match="no routing decision 'nope'"):
                router.decisions.feedback("nope", 1)
    assert (settled.outcome_status, settled.outcome_turns, settled.feedback, settled.feedback_note) == (
        "completed",
        1,
        1,
        "spot on",
    )
    assert settled.outcome_tokens == 120  # the turn that consumed the routed message
    (arm,) = compare([settled])
    assert (arm.arm, arm.decisions, arm.settled, arm.completion.value, arm.good_feedback.value) == (
        "smart",
        1,
        1,
        1.0,
        1.0,
    )


def test_decisions_since_a_time(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger, Router(ledger) as router:
        router.route("anything at all")
        assert len(router.decisions.decisions(0)) == 1
        assert router.decisions.decisions(NOW_MS * 10) == []
