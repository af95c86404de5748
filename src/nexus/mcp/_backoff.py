"""When a dead MCP server may be started again: supervision like the adapters', driven by need.

A server is not restarted in the background: the next call that needs it starts it. Between
attempts it waits out a backoff — none after the first death (a server that died once is started
again at once), then 1 s, 2 s, 4 s… capped at 300 s. After ``give_up_after`` deaths in a row it
has given up: calls fail at once saying so, and one more start is tried every ``cap_s``. A
connection that stayed up ``stable_after_s`` clears the count. Calls made while a server waits
out its backoff fail at once with a message saying when it is tried again: never a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True, frozen=True)
class RestartPolicy:
    """How soon, and how many times, a dead server is started again."""

    base_s: float = 1.0
    cap_s: float = 300.0
    give_up_after: int = 5
    stable_after_s: float = 60.0

    def delay(self, deaths: int) -> float:
        """Seconds to wait before the next start after ``deaths`` deaths in a row."""
        if deaths <= 1:
            return 0.0
        if deaths > self.give_up_after:
            return self.cap_s
        return float(min(self.cap_s, self.base_s * 2 ** (deaths - 2)))


@dataclass(slots=True)
class Backoff:
    """The death count of one server and when it may start next (an injectable clock for tests)."""

    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    deaths: int = 0
    retry_at: float = 0.0
    up_since: float | None = None

    def started(self) -> None:
        """The server is up."""
        self.up_since = self.clock()

    def died(self) -> None:
        """The server failed to start or went away: count it and set the earliest next start."""
        now = self.clock()
        if self.up_since is not None and now - self.up_since >= self.policy.stable_after_s:
            self.deaths = 0
        self.up_since = None
        self.deaths += 1
        self.retry_at = now + self.policy.delay(self.deaths)

    @property
    def gave_up(self) -> bool:
        """True after more deaths in a row than the policy allows."""
        return self.deaths > self.policy.give_up_after

    def wait_left(self) -> float:
        """Seconds until the next start may be tried (0 = now)."""
        return max(0.0, self.retry_at - self.clock())
