"""``[broker]`` and ``[agents.<id>]`` in nexus.toml: strict validation and what the broker gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.broker import QueueOverrides, QueueSettings
from nexus.broker.from_config import broker_settings, configured_agents
from nexus.config import load_config
from nexus.errors import ConfigError


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "nexus.toml"
    path.write_text(text)
    return path


def test_broker_and_agents_tables(isolated_env: Path) -> None:
    path = write(
        isolated_env,
        """
[broker]
mode = "collect"
cap = 5
max_concurrent = 2

[agents.lead]
role = "manager"
model = "openai/gpt-4o-mini"
system_prompt = "You coordinate the workers."

[agents.coder]
tools = ["read", "edit"]
session = "coding"
queue = { mode = "followup", drop_policy = "new" }
""",
    )
    config = load_config(str(path))
    settings = broker_settings(config.broker)
    assert settings.queue == QueueSettings(mode="collect", debounce_ms=1000, cap=5, drop_policy="summarize")
    assert settings.max_concurrent == 2 and settings.max_attempts == 3
    coder, lead = configured_agents(config.agents)
    assert (lead.identity.agent_id, lead.identity.session_label, lead.identity.role) == (
        "lead",
        "agent:lead",
        "manager",
    )
    assert lead.spec.to_json() == {"model": "openai/gpt-4o-mini", "system_prompt": "You coordinate the workers."}
    assert coder.identity.session_label == "coding" and coder.spec.to_json() == {"tools": ["read", "edit"]}
    assert coder.queue == QueueOverrides(mode="followup", drop_policy="new")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[broker]\nmode = "later"\n', "broker.mode"),
        ("[broker]\ncap = 0\n", "broker.cap"),
        ("[broker]\nmax_concurent = 2\n", "broker.max_concurent"),
        ('[agents."bad id"]\n', "agent id 'bad id' is not usable"),
        ('[agents.w]\nmodel = "gpt-4o"\n', "expected 'provider/model'"),
        ('[agents.w]\nrole = "boss"\n', "agents.w.role"),
        ('[agents.w.queue]\ndrop_policy = "random"\n', "agents.w.queue.drop_policy"),
    ],
)
def test_bad_tables_name_the_key(isolated_env: Path, text: str, expected: str) -> None:
    path = write(isolated_env, text)
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert expected in str(raised.value)


def test_the_mode_aliases_the_docs_name_load_from_the_file(isolated_env: Path) -> None:
    """docs/configuration.md accepts ``steer+backlog`` (OpenClaw's spelling) in ``[broker]``: the file refused it."""
    isolated_env.mkdir()
    (isolated_env / "nexus.toml").write_text(
        '[broker]\nmode = "steer+backlog"\n\n[agents.a]\nqueue = { mode = "coalesce" }\n'
    )
    config = load_config(None)
    assert config.broker.mode == "steer-backlog"
    assert config.agents["a"].queue.mode == "collect"
    (isolated_env / "nexus.toml").write_text('[broker]\nmode = "steer backlog"\n')
    with pytest.raises(ConfigError, match=r"broker\.mode"):
        load_config(None)


async def test_a_running_broker_runs_the_table_applied_to_the_registered_agent(isolated_env: Path) -> None:
    """``nexus serve`` registered a table's agent from the table alone: an agent added with ``--tools read``
    and given a table with only ``role`` ran with every tool."""
    from nexus.broker import AgentMessage
    from nexus.broker.host import running_broker
    from nexus.ledger import BrokerStore, Ledger
    from nexus.testing import FakeProviderServer
    from nexus.testing.steps import text

    async with FakeProviderServer(text("ok")) as server:
        write(
            isolated_env,
            f'default_model = "fake/fake-model"\n\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n\n[agents.c1]\nrole = "manager"\n',
        )
        config = load_config(None)
        with Ledger.open(config.database_path) as ledger:
            BrokerStore(ledger.database).add_agent("c1", spec={"tools": ["read"]})
            async with running_broker(config, ledger) as host:
                result = await host.broker.send_and_wait(AgentMessage("m-1", "user", "c1", "hi"), timeout_ms=60_000)
            row = BrokerStore(ledger.database).get_agent("c1")
        assert result.success, result.error
        body = server.last_request.body
        assert body is not None
        assert [tool["function"]["name"] for tool in body["tools"]] == ["read"]
        assert row is not None and (row.role, row.spec) == ("manager", {"tools": ["read"]})
