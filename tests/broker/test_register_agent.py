"""``AgentBroker.register_agent`` refuses what ``nexus agents add`` and ``POST /v1/agents`` refuse, storing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runtime import FakeRuntime

from nexus.broker import AgentBroker, AgentIdentity, AgentSpecError
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.errors import AgentSessionTakenError


def _engine_broker(ledger: Ledger, home: Path) -> AgentBroker:
    """A broker on the engine runtime of a nexus.toml that declares one extra provider, ``fake``."""
    (home / "nexus.toml").write_text(
        '[providers.fake]\napi = "openai-completions"\nbase_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8"
    )
    env = Runtime(load_config(str(home / "nexus.toml")), ledger, cooldowns=ProfileCooldowns())
    return AgentBroker(ledger, env)


def test_a_model_no_run_could_reach_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        broker = _engine_broker(ledger, tmp_path)
        for model, expected in (("nope/zzz", "unknown provider 'nope'"), ("gpt-4o", "is not 'provider/model'")):
            with pytest.raises(AgentSpecError, match=expected) as refused:
                broker.register_agent(AgentIdentity("w", "agent:w"), spec=AgentSpec(model=model))
            assert isinstance(refused.value, ValueError)
            assert str(refused.value).startswith("agent 'w': model: ")
        assert broker.get_agent("w") is None and BrokerStore(ledger.database).list_agents() == []
        for model in ("openai/gpt-4o-mini", "fake/anything"):  # known, or declared in nexus.toml (no key needed)
            broker.register_agent(AgentIdentity(f"ok-{model[:4]}", f"agent:{model[:4]}"), spec=AgentSpec(model=model))
        assert [a.identity.agent_id for a in broker.list_agents()] == ["ok-fake", "ok-open"]


async def test_a_session_another_agent_talks_in_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        broker = AgentBroker(ledger, FakeRuntime(store))
        broker.register_agent(AgentIdentity("a", "shared"))
        with pytest.raises(AgentSessionTakenError, match="session 'shared' belongs to agent 'a'") as refused:
            broker.register_agent(AgentIdentity("b", "shared"), spec=AgentSpec(tools=("read",)))
        assert isinstance(refused.value, ValueError)
        assert broker.get_agent("b") is None and [row.agent_id for row in store.list_agents()] == ["a"]
        broker.register_agent(AgentIdentity("a", "shared", "manager"))  # its own session: an update
        assert store.get_agent("a").role == "manager"  # type: ignore[union-attr]
        await ledger.sessions.add_alias("shared-alias", "shared")
        with pytest.raises(AgentSessionTakenError):  # an alias of it is the same session
            broker.register_agent(AgentIdentity("c", "shared-alias"))
