"""The model catalog and key / base-URL resolution."""

from __future__ import annotations

import pytest

from nexus.errors import ConfigError
from nexus.llm import get_model, list_models, list_providers
from nexus.llm.keys import api_key_env_vars, effective_base_url, resolve_api_key, resolve_base_url


def test_catalog_entry_with_prices() -> None:
    m = get_model("anthropic", "claude-sonnet-4-5-20250929")
    assert (m.api, m.context_window, m.max_tokens, m.input_price, m.output_price) == (
        "anthropic-messages",
        200_000,
        64_000,
        3.0,
        15.0,
    )
    assert m.reasoning and m.image_input and m.base_url == ""
    assert effective_base_url(m) == "https://api.anthropic.com"


def test_alias_keeps_the_requested_id() -> None:
    m = get_model("anthropic/claude-sonnet-4-5")
    assert m.id == "claude-sonnet-4-5" and m.input_price == 3.0


def test_provider_slash_id_form_with_slash_in_id() -> None:
    m = get_model("openrouter/meta-llama/llama-3.3-70b-instruct")
    assert m.provider == "openrouter" and m.id == "meta-llama/llama-3.3-70b-instruct"
    assert m.base_url == "" and effective_base_url(m) == "https://openrouter.ai/api/v1"


def test_unknown_models_get_defaults() -> None:
    a = get_model("anthropic", "claude-future-9")
    assert (a.api, a.context_window, a.max_tokens) == ("anthropic-messages", 200_000, 8_192)
    o = get_model("mycorp", "brainy-1")
    assert (o.api, o.context_window, o.max_tokens, o.base_url) == ("openai-completions", 200_000, 8_192, "")


def test_list_models_and_providers() -> None:
    everything = list_models()
    assert len(everything) >= 25
    openai = list_models("openai")
    assert {m.id for m in openai} >= {"gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "o4-mini", "gpt-5"}
    assert all(m.provider == "openai" for m in openai)
    assert {"anthropic", "openai", "google", "groq"} <= set(list_providers())
    gemini = get_model("google", "gemini-2.5-pro")
    assert gemini.context_window == 1_048_576 and gemini.api == "openai-completions"


@pytest.mark.parametrize("bad", ["gpt-4o", "/gpt-4o", "openai/"])
def test_bad_reference_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="provider/model-id"):
        get_model(bad)


def test_key_and_base_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert api_key_env_vars("openai") == ("OPENAI_API_KEY",)
    assert api_key_env_vars("my-corp") == ("MY_CORP_API_KEY",)
    assert api_key_env_vars("google") == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert resolve_api_key("openai") is None
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert resolve_api_key("openai") == "from-env"
    assert resolve_api_key("openai", "explicit") == "explicit"
    assert resolve_base_url("openai") == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8080/v1/")
    assert resolve_base_url("openai") == "http://localhost:8080/v1"
    assert resolve_base_url("openai", "https://model.example/v1/") == "https://model.example/v1"
    assert resolve_base_url("openai", "", "https://explicit.example/v1") == "https://explicit.example/v1"
    assert resolve_base_url("mycorp") is None


def test_a_lookup_makes_only_the_model_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run asks for one model: the other entries of the file stay data until someone asks for them."""
    import nexus.llm.catalog as catalog

    made: list[str] = []
    make = catalog._from_entry
    monkeypatch.setattr(catalog, "_catalog", None)
    monkeypatch.setattr(catalog, "_order", [])
    monkeypatch.setattr(catalog, "_made", {}, raising=False)
    monkeypatch.setattr(catalog, "_from_entry", lambda entry: made.append(entry["id"]) or make(entry))
    model = get_model("openai", "gpt-4o-mini")
    assert made == ["gpt-4o-mini"]
    assert get_model("openai/gpt-4o-mini") is model  # the same object, as when every entry was made at once
    assert model in list_models("openai") and len(made) == len(list_models("openai"))
