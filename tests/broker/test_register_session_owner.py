"""The registry refuses a session that is another agent's, whatever door registers (store, broker, CLI, HTTP).

"Another agent's" by the facts the chat facade reads for its 409 — its per-sender sessions (routed
forks too), the facade's ``:user:`` sessions of its own, a session stamped with it — and a session
where another agent's messages still wait or run (it moved away; they did not).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.errors import AgentSessionTakenError


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


@pytest.fixture
def store(ledger: Ledger) -> BrokerStore:
    store = BrokerStore(ledger.database)
    store.add_agent("m", spec={})  # talks in agent:m
    return store


def _refused(store: BrokerStore, agent_id: str, label: str, owner: str) -> AgentSessionTakenError:
    with pytest.raises(AgentSessionTakenError) as refused:
        store.add_agent(agent_id, session_label=label, spec={})
    assert refused.value.owner == owner and f"agent {owner!r}" in str(refused.value)
    assert store.get_agent(agent_id) is None  # nothing stored
    return refused.value


def test_another_agents_per_sender_fork_and_facade_sessions_are_refused(ledger: Ledger, store: BrokerStore) -> None:
    store.add_agent("lead", spec={})
    run_inline(ledger.sessions.ensure(NewSession("m~s1", routing_key="s1")))  # m's chat with key s1
    for label, owner in (
        ("m~s1", "m"),  # an existing per-sender session
        ("m~dm~telegram~42", "m"),  # one not made yet: it would be m's the moment that sender writes
        ("lead~fork~route-1", "lead"),  # a routed fork of lead
        ("agent:m:user:bob", "m"),  # the facade's session of m for user bob
    ):
        _refused(store, "squat", label, owner)
        assert store.save_agent("m", role="worker", session_label="agent:m", spec={})  # m itself: fine
    with pytest.raises(AgentSessionTakenError):  # the broker's door (save_agent) refuses the same
        store.save_agent("squat", role="worker", session_label="m~s1", spec={})
    assert store.add_agent("squat", session_label="nobody~here", spec={}).session_label == "nobody~here"


def test_a_session_stamped_for_another_agent_is_refused_while_it_is_registered(
    ledger: Ledger, store: BrokerStore
) -> None:
    run_inline(ledger.sessions.ensure(NewSession("proj-x", metadata={"agent": "m"})))
    _refused(store, "squat", "proj-x", "m")
    assert store.add_agent("m", session_label="proj-x", spec={}).session_label == "proj-x"  # its own
    store.add_agent("m", session_label="agent:m", spec={})
    assert store.remove_agent("m")
    assert store.add_agent("squat", session_label="proj-x", spec={}).session_label == "proj-x"  # m is gone


def test_a_long_agent_ids_cut_per_sender_prefix_is_its_own(store: BrokerStore) -> None:
    long_id = "a" * 40
    store.add_agent(long_id, spec={})
    _refused(store, "squat", f"{long_id[:32]}~odd_key!0123456789abcdef", long_id)


def test_a_sub_agent_session_under_a_fork_goes_to_its_worker(ledger: Ledger, store: BrokerStore) -> None:
    made = NewSession("m~fork~r1/todo-01abc", is_subagent=True, parent_session_label="m~fork~r1")
    run_inline(ledger.sessions.ensure(made))
    worker = store.save_agent("worker-01abc", role="worker", session_label="m~fork~r1/todo-01abc", spec={})
    assert worker.session_label == "m~fork~r1/todo-01abc"


def test_a_session_another_agent_still_has_messages_in_is_refused_until_they_finish(store: BrokerStore) -> None:
    item, _ = store.accept(
        agent_id="m", session_label="agent:m", message_id="x1", sender="user",
        message={"content": "X1"}, mode="followup",
    )  # fmt: skip
    assert store.add_agent("m", session_label="m-new", spec={}).session_label == "m-new"  # m moves on; X1 stays
    refused = _refused(store, "m2", "agent:m", "m")
    assert refused.pending == 1 and "1 unfinished message(s) of agent 'm'" in str(refused)
    store.drop([item.id], "cleared by the user")
    assert store.add_agent("m2", session_label="agent:m", spec={}).session_label == "agent:m"
