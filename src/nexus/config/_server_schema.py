"""``[server]`` of ``nexus.toml``: where ``nexus serve`` listens and who may call it."""

from __future__ import annotations

from nexus.config._record import Record, setting


class ServerConfig(Record):
    """``[server]``: bind address, bearer tokens, CORS and request limits."""

    host: str = setting(default="127.0.0.1", min_length=1)
    port: int = setting(default=8700, ge=0, le=65535)
    tokens: list[str] = setting(default_factory=list)
    """Bearer tokens accepted by the API (``${NEXUS_TOKEN}`` style references allowed). Empty: no auth,
    which ``nexus serve`` allows only on a loopback address."""
    cors_origins: list[str] = setting(default_factory=list)
    """Origins allowed to call the API from a browser page served elsewhere; none by default."""
    max_body_bytes: int = setting(default=2_000_000, gt=0)
    """Requests with a larger body are refused with 413 before they are read."""
    events_retention_seconds: float = setting(default=600.0, gt=0)
    """How long a session's SSE events stay available for a ``Last-Event-ID`` resume (seconds)."""
    events_retention_count: int = setting(default=10_000, gt=0)
    """At most this many events are kept per session (the oldest go first)."""
    events_heartbeat_seconds: float = setting(default=15.0, gt=0)
    """An idle SSE stream gets a comment line this often, so proxies keep it open."""
