"""Where API keys and base URLs come from: explicit options, then the environment, then defaults.

Convention: provider ``foo`` reads ``FOO_API_KEY`` and ``FOO_BASE_URL`` (dashes become
underscores), so any OpenAI-compatible vendor works without code. ``google`` also reads
``GEMINI_API_KEY``. Local servers (Ollama, llama.cpp, LM Studio, vLLM, or any base URL
on localhost) need no key.
"""

from __future__ import annotations

import os

DEFAULT_BASE_URLS: dict[str, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1beta/openai",
    "groq": "https://api.groq.com/openai/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "xai": "https://api.x.ai/v1",
    "mistral": "https://api.mistral.ai/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "together": "https://api.together.xyz/v1",
    "fireworks": "https://api.fireworks.ai/inference/v1",
    "cerebras": "https://api.cerebras.ai/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "vllm": "http://127.0.0.1:8000/v1",
}
"""Base URL of each known provider when neither options nor environment give one."""

KEYLESS_PROVIDERS = frozenset({"ollama", "lmstudio", "llamacpp", "llama-cpp", "vllm", "local"})
"""Providers that run locally and accept requests without a key."""

_EXTRA_KEY_VARS: dict[str, tuple[str, ...]] = {"google": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}


def _prefix(provider: str) -> str:
    return provider.upper().replace("-", "_").replace(".", "_")


def api_key_env_vars(provider: str) -> tuple[str, ...]:
    """The environment variables read for ``provider``'s key, in order."""
    return _EXTRA_KEY_VARS.get(provider, (f"{_prefix(provider)}_API_KEY",))


def base_url_env_var(provider: str) -> str:
    """The environment variable that overrides ``provider``'s base URL."""
    return f"{_prefix(provider)}_BASE_URL"


def resolve_api_key(provider: str, explicit: str | None = None) -> str | None:
    """``explicit`` if given, else the first set environment variable for ``provider``."""
    if explicit:
        return explicit
    for name in api_key_env_vars(provider):
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve_base_url(provider: str, model_base_url: str = "", explicit: str | None = None) -> str | None:
    """``explicit``, else ``<PROVIDER>_BASE_URL``, else the model's, else the provider default."""
    if explicit:
        return explicit.rstrip("/")
    env = os.environ.get(base_url_env_var(provider))
    if env:
        return env.rstrip("/")
    if model_base_url:
        return model_base_url.rstrip("/")
    default = DEFAULT_BASE_URLS.get(provider)
    return default


def key_required(provider: str, base_url: str) -> bool:
    """False for local servers, which accept requests without a key."""
    if provider in KEYLESS_PROVIDERS:
        return False
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "").lower()
    return host not in ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def missing_key_message(provider: str) -> str:
    """What to tell a user whose key is missing."""
    names = " or ".join(api_key_env_vars(provider))
    return f"no API key for provider {provider!r}: set {names} or pass api_key in StreamOptions"


def known_providers() -> list[str]:
    """Providers with a default base URL (any other needs ``<PROVIDER>_BASE_URL`` or base_url)."""
    return sorted(DEFAULT_BASE_URLS)
