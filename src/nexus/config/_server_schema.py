"""``[server]`` of ``nexus.toml``: where ``nexus serve`` listens and who may call it."""

from __future__ import annotations

from nexus.config._record import Record, field_check, setting


class ServerConfig(Record):
    """``[server]``: bind address, bearer tokens, the names and origins browsers may use, CORS and request limits."""

    host: str = setting(default="127.0.0.1", min_length=1)
    port: int = setting(default=8700, ge=0, le=65535)
    tokens: list[str] = setting(default_factory=list)
    """Bearer tokens accepted by the API (``${NEXUS_TOKEN}`` style references allowed). Empty: no auth,
    which ``nexus serve`` allows only on a loopback address."""
    require_token: bool = False
    """Even on loopback without ``tokens``, every API call needs a token: the one ``nexus serve`` makes at each
    start, written to ``server.json`` (0600) for the CLI and printed in the web UI's address."""
    allowed_hosts: list[str] = setting(default_factory=list)
    """``Host`` names the server answers to besides ``localhost``, loopback addresses and the bound address
    (a reverse proxy's public name; ``name:port`` admits one port only; ``"*"`` turns the check off)."""
    cors_origins: list[str] = setting(default_factory=list)
    """Origins allowed to call the API from a browser page served elsewhere; none by default."""
    max_body_bytes: int = setting(default=2_000_000, gt=0)
    """Requests with a larger body are refused with 413 before they are read."""
    header_timeout_seconds: float = setting(default=10.0, gt=0, le=3600)
    """A connection must send a request's whole head within this many seconds (or be closed)."""
    body_timeout_seconds: float = setting(default=60.0, gt=0, le=3600)
    """A request's body must arrive within this many seconds of its head (or the connection is closed)."""
    events_retention_seconds: float = setting(default=600.0, gt=0)
    """How long a session's SSE events stay available for a ``Last-Event-ID`` resume (seconds)."""
    events_retention_count: int = setting(default=10_000, gt=0)
    """At most this many events are kept per session (the oldest go first)."""
    events_retention_total_bytes: int = setting(default=64 * 1024 * 1024, ge=1024 * 1024)
    """At most this many bytes of events are kept for all sessions together (the oldest go first)."""
    events_heartbeat_seconds: float = setting(default=15.0, gt=0)
    """An idle SSE stream gets a comment line this often, so proxies keep it open."""
    events_log_flush_ms: int = setting(default=20, ge=1, le=1000)
    """PostgreSQL: a process writes its runs' events to the shared log every this many milliseconds, in one
    transaction (shorter: less latency across processes, more transactions)."""
    events_log_max_rows: int = setting(default=100_000, ge=1000)
    """PostgreSQL: the shared event log keeps at most this many rows (older ones go at the next trim)."""

    @field_check("allowed_hosts")
    def _host_names(value: list[str]) -> list[str]:
        from nexus.config._host_names import host_entry_problem

        problems = [problem for entry in value if (problem := host_entry_problem(entry))]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_check("cors_origins")
    def _origins(value: list[str]) -> list[str]:
        bad = [origin for origin in value if origin != "*" and not origin.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"{bad[0]!r}: an origin is scheme://host[:port], e.g. 'https://app.example.com'")
        return value
