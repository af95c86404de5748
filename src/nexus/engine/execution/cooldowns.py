"""Per-(provider, profile) cooldowns: which key just failed, and for how long it is left alone.

Failover (:mod:`nexus.engine.execution.failover`) records each failure and success here and asks
what is cooling down before it picks a profile; the table outlives any one run (the
``Runtime``'s, or the process-wide :data:`SHARED_COOLDOWNS`).
"""

from __future__ import annotations

from nexus._dataclass import dataclass
from nexus.errors import ConfigError
from nexus.llm import ErrorKind


@dataclass(slots=True)
class _Cooldown:
    until: float = 0.0
    next_delay: float = 1.0
    failures: int = 0
    kind: ErrorKind | None = None


class ProfileCooldowns:
    """Per-(provider, profile) cooldowns, shared by every run of the process.

    A profile that just hit a rate limit should not be the first choice of the next run
    either, so this lives outside any one run. Times come from the caller's clock.
    """

    __slots__ = ("_state", "initial_s", "max_s")

    def __init__(self, initial_s: float = 1.0, max_s: float = 60.0) -> None:
        if not 0 < initial_s <= max_s:
            raise ConfigError(f"cooldowns need 0 < initial_s <= max_s, got {initial_s} and {max_s}")
        self.initial_s = initial_s
        self.max_s = max_s
        self._state: dict[tuple[str, str], _Cooldown] = {}

    def record_failure(
        self,
        provider: str,
        profile: str,
        now: float,
        retry_after: float | None = None,
        *,
        kind: ErrorKind | None = None,
        delay: float | None = None,
    ) -> float:
        """Start (or extend) the profile's cooldown; returns its length in seconds.

        ``delay`` replaces the backoff step for this failure (the backoff does not advance):
        failover passes a short one for a local server that refused the connection.
        ``kind`` is remembered, so a later "still cooling down" error keeps the real cause.
        """
        state = self._state.setdefault((provider, profile), _Cooldown(next_delay=self.initial_s))
        step = delay
        if step is None:
            step = state.next_delay
            state.next_delay = min(step * 2, self.max_s)
        state.failures += 1
        state.kind = kind or state.kind
        cooldown = max(step, retry_after or 0.0)
        state.until = now + cooldown
        return cooldown

    def last_kind(self, provider: str, profile: str) -> ErrorKind | None:
        """The kind of the profile's last recorded failure (None when it has none)."""
        state = self._state.get((provider, profile))
        return state.kind if state is not None else None

    def record_success(self, provider: str, profile: str) -> None:
        """Clear the profile's cooldown and reset its backoff to the initial delay."""
        self._state.pop((provider, profile), None)

    def remaining(self, provider: str, profile: str, now: float) -> float:
        """Seconds until the profile is usable again (0 when it is usable now)."""
        state = self._state.get((provider, profile))
        return max(0.0, state.until - now) if state is not None else 0.0

    def failures(self, provider: str, profile: str) -> int:
        """Failures since the profile's last success."""
        state = self._state.get((provider, profile))
        return state.failures if state is not None else 0


SHARED_COOLDOWNS = ProfileCooldowns()
"""The process-wide cooldown table used when :func:`failover_stream` is not given one."""
