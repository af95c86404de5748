"""Where API keys and base URLs come from: explicit choices first, then the environment, then defaults.

Convention: provider ``foo`` reads ``FOO_API_KEY`` and ``FOO_BASE_URL`` (dashes become
underscores), so any OpenAI-compatible vendor works without code. A base URL is resolved
most specific first: ``StreamOptions.base_url``, a ``base_url`` set on the ``Model``
(``""`` means not set; catalog models leave it empty), ``FOO_BASE_URL``, then the
provider's built-in default, so a URL chosen in code or config is never silently
redirected by a variable left in the shell. ``google`` also reads
``GEMINI_API_KEY``. Local servers (Ollama, llama.cpp, LM Studio, vLLM, or any base URL
on localhost) need no key.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.llm.options import StreamOptions
    from nexus.llm.types import Model

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
"""Base URL of each known provider when neither options, the model nor the environment give one."""

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
    """The URL a call to ``provider`` goes to, or ``None`` when nothing gives one.

    Most specific first: ``explicit`` (``StreamOptions.base_url``), the model's own
    ``base_url``, ``<PROVIDER>_BASE_URL``, then the provider default. Blank values count
    as not set; a trailing ``/`` is dropped so paths can be appended.
    """
    for candidate in (
        explicit,
        model_base_url,
        os.environ.get(base_url_env_var(provider)),
        DEFAULT_BASE_URLS.get(provider),
    ):
        if candidate and candidate.strip():
            return candidate.strip().rstrip("/")
    return None


def effective_base_url(model: Model, options: StreamOptions | None = None) -> str | None:
    """The base URL a call with ``model`` (and ``options``) would use right now, for display and checks.

    Catalog models keep ``base_url`` empty so the environment and defaults still apply;
    UIs call this to show where requests actually go. ``None`` means the provider is
    unknown and needs ``<PROVIDER>_BASE_URL`` or an explicit ``base_url``.
    """
    explicit = options.base_url if options is not None else None
    return resolve_base_url(model.provider, model.base_url, explicit)


HTTP_APIS = frozenset({"anthropic-messages", "openai-completions", "openai-responses"})
"""The built-in wire APIs that send requests to a base URL (``llama-cpp`` runs in-process)."""


def base_url_missing(model: Model, options: StreamOptions | None = None) -> bool:
    """True when ``model`` speaks an HTTP API but no base URL is known for it (unknown provider).

    ``nexus.llm.stream`` refuses such a call and the engine's pre-flight check names the
    provider; both ask here so they agree on which models are unreachable.
    """
    return model.api in HTTP_APIS and effective_base_url(model, options) is None


def missing_base_url_message(provider: str) -> str:
    """What to tell a user whose provider has no base URL anywhere."""
    return (
        f"no base URL for provider {provider!r}: set {base_url_env_var(provider)}, give the model a base_url "
        f"or pass base_url in StreamOptions"
    )


def key_required(provider: str, base_url: str) -> bool:
    """False for local servers, which accept requests without a key."""
    if provider in KEYLESS_PROVIDERS:
        return False
    return not is_local_url(base_url)


@functools.lru_cache(maxsize=256)
def is_local_url(url: str) -> bool:
    """True when ``url`` points at this machine (localhost, a loopback address, 0.0.0.0).

    Such a server needs no key, and failover treats it specially: a refused connection
    there means the server is not running, which waiting a few seconds will not change.
    Remembered per URL: failover asks on every model call, and a host name that is not an
    address costs a raised ``ValueError`` each time.
    """
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:  # a malformed URL (bad port, bracket) is not a local server
        return False
    if host in ("localhost", "0.0.0.0") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def missing_key_message(provider: str) -> str:
    """What to tell a user whose key is missing."""
    names = " or ".join(api_key_env_vars(provider))
    return f"no API key for provider {provider!r}: set {names} or pass api_key in StreamOptions"


def known_providers() -> list[str]:
    """Providers with a default base URL (any other needs ``<PROVIDER>_BASE_URL`` or base_url)."""
    return sorted(DEFAULT_BASE_URLS)
