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
