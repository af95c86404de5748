"""The one credential type: an auth profile with its key resolved (stdlib only, cheap to import).

``nexus.toml``'s ``[providers.X] auth_profiles`` tables (``AuthProfile`` in the schema, keys may
hold ``${VAR}``) resolve to these; failover (``nexus.engine``) rotates through them. One type
from config to the wire, so no field (a per-profile ``base_url``) is lost between two copies.
"""

from __future__ import annotations

from dataclasses import field

from nexus._dataclass import dataclass
from nexus.errors import ConfigError


@dataclass(slots=True, frozen=True)
class ResolvedProfile:
    """An auth profile with its key substituted.

    :func:`~nexus.config.provider_settings` only returns profiles with a key (an unset variable
    is a ConfigError there); ``api_key=None`` with ``missing`` describes a profile built by
    hand whose variables are not set, and :meth:`require_key` reports it. The key never
    appears in ``repr`` (logs, tracebacks). ``base_url`` overrides the model's endpoint for
    calls made with this profile (None = the model's).
    """

    name: str
    api_key: str | None = field(repr=False)
    source: str = ""
    missing: tuple[str, ...] = ()
    base_url: str | None = None

    def require_key(self) -> str:
        """The key, or a ConfigError naming the unset variable and where it was referenced."""
        if self.api_key is not None:
            return self.api_key
        names = ", ".join(self.missing) or "the key"
        raise ConfigError(f"auth profile {self.name!r} ({self.source}) needs {names}: export it or remove the profile")
