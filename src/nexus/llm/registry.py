"""Which code speaks which wire API.

Built-in providers are registered by module path and imported on first use, so
``import nexus.llm`` never pays for a provider it does not call. Users (and
``nexus.testing``) add their own with :func:`register_api`.
"""

from __future__ import annotations

import importlib

from nexus.errors import UnknownProviderError
from nexus.llm.options import StreamFn

_BUILTIN_MODULES: dict[str, str] = {
    "anthropic-messages": "nexus.llm.providers.anthropic",
    "openai-completions": "nexus.llm.providers.openai_completions",
    "openai-responses": "nexus.llm.providers.openai_responses",
    "llama-cpp": "nexus.llm.providers.llama_cpp",
}

_registered: dict[str, StreamFn] = {}


def register_api(api: str, stream_fn: StreamFn) -> None:
    """Make ``stream_fn`` serve every model whose ``api`` is ``api`` (replaces a previous one)."""
    _registered[api] = stream_fn


def unregister_api(api: str) -> None:
    """Remove a user-registered API (built-ins come back on next use)."""
    _registered.pop(api, None)


def known_apis() -> list[str]:
    """Every API name that :func:`resolve_api` accepts, sorted."""
    return sorted(set(_BUILTIN_MODULES) | set(_registered))


def resolve_api(api: str) -> StreamFn:
    """The stream function for ``api``; :class:`UnknownProviderError` lists the known ones."""
    found = _registered.get(api)
    if found is not None:
        return found
    module_name = _BUILTIN_MODULES.get(api)
    if module_name is None:
        raise UnknownProviderError(f"unknown API {api!r}; known APIs: {', '.join(known_apis())}")
    module = importlib.import_module(module_name)
    stream_fn: StreamFn = module.stream
    _registered[api] = stream_fn
    return stream_fn
