"""The nexus.toml CLI tests use to point the default model at a loopback fake provider."""

from __future__ import annotations

from pathlib import Path

from nexus.testing import FakeProviderServer


def write_fake_config(home: Path, server: FakeProviderServer, extra: str = "") -> None:
    """A nexus.toml whose default model is served by ``server`` (OpenAI chat completions, key "test")."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n'
        f"{extra}\n"
        "[providers.fake]\n"
        'api = "openai-completions"\n'
        f'base_url = "{server.openai_base_url}"\n'
        'api_key = "test"\n',
        encoding="utf-8",
    )
