"""The model catalog: context windows, output limits and prices of common models.

The data live in ``models.json`` next to this file (edit it, no code change needed) and
are read on first use. Models not in the catalog still work: :func:`get_model` returns
defaults (200k context, 8192 output tokens, ``anthropic-messages`` for Anthropic and
``openai-completions`` for every other provider), so any OpenAI-compatible server can be
used by name.

Catalog models leave ``base_url`` empty ("not set"): the call resolves it from
``<PROVIDER>_BASE_URL`` or the provider's default at call time, while a ``base_url``
the user sets on a model wins over both. :func:`nexus.llm.effective_base_url` shows
where a model's requests would go.
"""

from __future__ import annotations

import json
import os
from typing import Any

from nexus.errors import ConfigError
from nexus.llm.types import Model

DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_MAX_TOKENS = 8_192
# The in-process llama.cpp provider: its window is the n_ctx it loads the model with.
LOCAL_CONTEXT_WINDOW = 4_096
LOCAL_MAX_TOKENS = 1_024
_DEFAULT_APIS = {"anthropic": "anthropic-messages", "local": "llama-cpp"}

_catalog: dict[tuple[str, str], dict[str, Any]] | None = None
"""The file's entries by (provider, id or alias); an entry becomes a :class:`Model` when it is asked for (a run
asks for one or two of the ~35)."""
_order: list[dict[str, Any]] = []
_made: dict[tuple[str, str], Model] = {}


def _load() -> dict[tuple[str, str], dict[str, Any]]:
    global _catalog
    if _catalog is not None:
        return _catalog
    with open(os.path.join(os.path.dirname(__file__), "models.json"), encoding="utf-8") as fh:
        raw = json.load(fh)
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in raw["models"]:
        _order.append(entry)
        provider = str(entry["provider"])
        table[(provider, str(entry["id"]))] = entry
        for alias in entry.get("aliases", ()):
            table.setdefault((provider, alias), entry)
    _catalog = table
    return table


def _model(entry: dict[str, Any]) -> Model:
    """The entry's model, made once (every lookup of an entry returns the same object)."""
    key = (str(entry["provider"]), str(entry["id"]))
    model = _made.get(key)
    if model is None:
        model = _made[key] = _from_entry(entry)
    return model


def _from_entry(entry: dict[str, Any]) -> Model:
    provider = str(entry["provider"])
    return Model(
        id=str(entry["id"]),
        provider=provider,
        api=str(entry["api"]),
        base_url=str(entry.get("base_url") or ""),
        name=str(entry.get("name", entry["id"])),
        context_window=int(entry.get("context_window", DEFAULT_CONTEXT_WINDOW)),
        max_tokens=int(entry.get("max_tokens", DEFAULT_MAX_TOKENS)),
        input_price=float(entry.get("input_price", 0.0)),
        output_price=float(entry.get("output_price", 0.0)),
        cache_read_price=float(entry.get("cache_read_price", 0.0)),
        cache_write_price=float(entry.get("cache_write_price", 0.0)),
        reasoning=bool(entry.get("reasoning", False)),
        image_input=bool(entry.get("image_input", False)),
    )


def get_model(provider: str, model_id: str | None = None) -> Model:
    """The catalog entry for ``provider``/``model_id`` (also ``get_model("provider/id")``), else defaults.

    An alias (``claude-sonnet-4-5``) returns its entry under the name asked for, so
    requests use the id the caller chose.
    """
    if model_id is None:
        provider, sep, model_id = provider.partition("/")
        if not sep or not provider or not model_id:
            raise ConfigError(f"model reference {provider + sep + model_id!r} must look like 'provider/model-id'")
    if not provider or not model_id:
        raise ConfigError("get_model needs a provider and a model id, e.g. get_model('openai', 'gpt-4o')")
    entry = _load().get((provider, model_id))
    if entry is not None:
        found = _model(entry)
        if found.id != model_id:
            return Model(**{**_fields(found), "id": model_id})
        return found
    return Model(
        id=model_id,
        provider=provider,
        api=_DEFAULT_APIS.get(provider, "openai-completions"),
        name=model_id,
        context_window=LOCAL_CONTEXT_WINDOW if provider == "local" else DEFAULT_CONTEXT_WINDOW,
        max_tokens=LOCAL_MAX_TOKENS if provider == "local" else DEFAULT_MAX_TOKENS,
    )


def _fields(model: Model) -> dict[str, Any]:
    return {name: getattr(model, name) for name in Model.__dataclass_fields__}


def list_models(provider: str | None = None) -> list[Model]:
    """Catalog models, in file order, optionally only ``provider``'s."""
    _load()
    return [_model(entry) for entry in _order if provider is None or entry["provider"] == provider]


def list_providers() -> list[str]:
    """Providers that have at least one catalog entry."""
    _load()
    return sorted({str(entry["provider"]) for entry in _order})
