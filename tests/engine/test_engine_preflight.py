"""A run that cannot reach any model is refused before anything is written; a missing key never backs off."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.config import parse_config
from nexus.engine import preflight, resolve_model, run_agent
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.failover import failover_stream
from nexus.engine.types import EngineEvent
from nexus.engine.wiring.models import model_problem
from nexus.errors import ConfigError
from nexus.llm.types import Context, UserMessage


def test_missing_key_is_refused_naming_the_variable_and_the_config_way() -> None:
    config = parse_config("")
    model = resolve_model(config, "openai/gpt-4o-mini")
    with pytest.raises(ConfigError) as info:
        preflight(config, model)
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "[providers.openai]" in message and "StreamOptions" not in message


def test_a_keyed_fallback_lets_the_run_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "k")
    config = parse_config('fallbacks = ["groq/llama-3.3-70b-versatile"]\n')
    primary, fallback = resolve_model(config, "openai/gpt-4o-mini"), resolve_model(config, config.fallbacks[0])
    assert model_problem(config, primary) is not None and model_problem(config, fallback) is None
    preflight(config, primary, [fallback])  # the keyed fallback is enough: no ConfigError


def test_keyless_and_localhost_models_need_no_key() -> None:
    config = parse_config('[providers.mine]\nbase_url = "http://127.0.0.1:9/v1"\n')
    for model in (resolve_model(config, "mine/m"), resolve_model(config, "ollama/llama3")):
        assert model_problem(config, model) is None
        preflight(config, model)  # no ConfigError


def test_unresolved_key_reference_is_named() -> None:
    config = parse_config('[providers.openai]\napi_key = "${NOT_SET_ANYWHERE_KEY}"\n')
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE_KEY"):
        preflight(config, resolve_model(config, "openai/gpt-4o-mini"))


def test_unknown_provider_lists_known_ones_and_how_to_add_one() -> None:
    config = parse_config("")
    with pytest.raises(ConfigError) as info:
        preflight(config, resolve_model(config, "openai/gpt-4o-mini"), [resolve_model(config, "foo/bar")])
    message = str(info.value)
    assert "unknown provider 'foo'" in message and "openai" in message and "anthropic" in message
    assert "[providers.foo]" in message and "base_url" in message and "api =" in message
    assert "UnknownProviderError" not in message


def test_unknown_local_model_id_says_how_to_configure_one() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model(parse_config(""), "local/nonexistent")
    assert "unknown local model 'nonexistent'" in str(info.value) and "model_path" in str(info.value)
    configured = parse_config('[local]\nmodel_id = "mine"\nmodel_path = "/x/mine.gguf"\n')
    assert resolve_model(configured, "local/mine").id == "mine"


async def test_run_agent_refuses_before_writing(isolated_env: Path) -> None:
    from nexus.ledger import Ledger

    config = parse_config("")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
            await run_agent("hi", model="openai/gpt-4o-mini", config=config, ledger=ledger)
        assert await ledger.sessions.list() == []


async def test_missing_key_is_not_retried_with_backoff() -> None:
    """Through the real provider stream: no key → one attempt, no waiting, error kind auth_permanent."""
    model = resolve_model(parse_config(""), "openai/gpt-4o-mini")
    events: list[EngineEvent] = []
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    stream = failover_stream([model], {}, on_event=events.append, cooldowns=ProfileCooldowns(), sleep=sleep)
    final = None
    async for event in stream(model, Context(messages=[UserMessage("hi")]), None):
        final = event
    assert final is not None and final.type == "error"
    assert final.error.error_kind == "auth_permanent"
    assert "OPENAI_API_KEY" in (final.error.error_message or "")
    assert slept == [] and all(getattr(e, "delay_s", 0) == 0 for e in events)


async def test_loop_failure_names_the_exception_type_once() -> None:
    """An unknown provider reaching the agent loop: "UnknownProviderError: …", never doubled."""
    from nexus.agent import AgentContext, AgentLoopConfig, agent_loop
    from nexus.errors import UnknownProviderError
    from nexus.llm.types import AssistantMessage, Model

    def raising(*_: object) -> object:
        raise UnknownProviderError("unknown provider 'foo'")

    model = Model(id="bar", provider="foo", api="openai-completions")
    config = AgentLoopConfig(model, stream_fn=raising)  # type: ignore[arg-type]
    errors = []
    async for event in agent_loop(UserMessage("hi"), AgentContext(), config):
        message = getattr(event, "message", None)
        if isinstance(message, AssistantMessage) and message.error_message:
            errors.append(message.error_message)
    assert errors and all(e.count("UnknownProviderError") == 1 for e in errors), errors
