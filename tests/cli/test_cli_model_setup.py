"""``model_for``: catalog facts + config overrides → the Model a run uses."""

from __future__ import annotations

from pathlib import Path

from nexus.cli._model_setup import model_for
from nexus.config import parse_config


def test_catalog_model_with_env_base_url() -> None:
    config = parse_config("")
    model = model_for(config, "openai", "gpt-4o-mini", {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert (model.provider, model.id, model.api) == ("openai", "gpt-4o-mini", "openai-completions")
    assert model.base_url == "http://127.0.0.1:9/v1"
    assert model.input_price > 0, "catalog prices are kept"


def test_config_overrides_apply() -> None:
    config = parse_config(
        """
[providers.ollama]
base_url = "http://127.0.0.1:11434/v1"
headers = { "X-Client" = "nexus" }

[providers.ollama.models."qwen2.5:7b"]
context_window = 32768
max_tokens = 4096
output_price = 0.5
"""
    )
    model = model_for(config, "ollama", "qwen2.5:7b", {})
    assert model.api == "openai-completions"
    assert model.base_url == "http://127.0.0.1:11434/v1"
    assert model.context_window == 32768 and model.max_tokens == 4096 and model.output_price == 0.5
    assert ("X-Client", "nexus") in model.headers


def test_declared_api_wins() -> None:
    config = parse_config('[providers.openai]\napi = "openai-responses"\n')
    assert model_for(config, "openai", "gpt-4o", {}).api == "openai-responses"


def test_local_model_uses_the_local_section(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    config = parse_config(f'[local]\nmodel_id = "mine"\nmodel_path = "{gguf}"\nn_ctx = 2048\n')
    model = model_for(config, "local", "mine", {})
    assert (model.provider, model.api, model.context_window) == ("local", "llama-cpp", 2048)
    assert model.base_url == str(gguf)
    assert model.input_price == 0
