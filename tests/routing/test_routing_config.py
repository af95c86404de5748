"""``[routing]`` of nexus.toml: a record table like the others (strict types, bounds, known names)."""

from __future__ import annotations

import pytest

from nexus.config import parse_config
from nexus.errors import ConfigError


def test_the_routing_table_is_read() -> None:
    config = parse_config(
        '[routing]\nmode = "hybrid"\nsmart_share = 0.5\nthreshold = 0.4\n[routing.agents]\ncoder = "smart"\n',
        "nexus.toml",
    )
    routing = config.routing
    assert (routing.mode, routing.smart_share, routing.threshold, routing.agents) == (
        "hybrid",
        0.5,
        0.4,
        {"coder": "smart"},
    )
    assert parse_config("", "nexus.toml").routing.mode == "explicit"


@pytest.mark.parametrize(("line", "says"), [
    ('mode = "clever"', "nexus.toml:2: routing.mode: Input should be 'explicit', 'smart' or 'hybrid'"),
    ("smart_share = 2", "nexus.toml:2: routing.smart_share: Input should be less than or equal to 1.0"),
    ('threshold = "0.5"', "nexus.toml:2: routing.threshold: Input should be a valid number"),
    ("max_task_chars = 5", "nexus.toml:2: routing.max_task_chars: Input should be greater than or equal to 100"),
    ('agents = { coder = "smarty" }', "routing.agents.coder: Input should be 'explicit', 'smart' or 'hybrid'"),
    ('embedder = "bert"', "routing.embedder: Input should be 'wordllama', 'openai' or 'none'"),
    ("poll = 3", "routing.poll: unknown key 'poll'"),
])  # fmt: skip
def test_a_bad_routing_key_is_a_config_error_naming_it(line: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[routing]\n{line}\n", "nexus.toml")
    assert says in str(info.value)
