"""From a config + a ``provider/model`` choice to the :class:`~nexus.llm.types.Model` a run uses.

The catalog knows context windows and prices; the config can override them
(``[providers.x.models.y]``), point a provider elsewhere (``base_url``, ``headers``) and
describe the local model (``[local]``). ``run``/``chat`` call :func:`model_for` for the
chosen model and for each fallback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.llm import Model


def model_for(config: NexusConfig, provider: str, model_id: str, env: Mapping[str, str] | None = None) -> Model:
    """The model with catalog facts, then the config's overrides, base URL and headers applied."""
    from nexus.config import provider_settings
    from nexus.llm import get_model

    source_env = os.environ if env is None else env
    settings = provider_settings(config, provider, source_env)
    declared = config.providers.get(provider)
    if settings.api == "llama-cpp":
        from nexus.llm import register_local_model

        path = config.local_model_path if model_id == config.local.model_id else None
        local = config.local
        model = register_local_model(model_id, path, local.n_ctx, local.n_threads, local.chat_format)
    else:
        model = get_model(provider, model_id)
        if declared is not None and declared.api:
            model = replace(model, api=declared.api)
        if settings.base_url:
            model = replace(model, base_url=settings.base_url)
    if settings.headers:
        model = replace(model, headers=(*model.headers, *settings.headers))
    override = settings.models.get(model_id)
    if override is None:
        return model
    changes = {name: value for name, value in override.model_dump().items() if value is not None}
    return replace(model, **changes)
