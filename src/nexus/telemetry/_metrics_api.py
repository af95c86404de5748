"""What the layers record as metrics: one method per measurement, a no-op until metrics are on.

The recording implementation (:mod:`nexus.telemetry._prometheus`) subclasses :class:`Metrics`,
so the list of measurements is written once, here. Call sites hold no metric objects and build
no label dicts: ``metrics().tool_call("read", 0.002, failed=False)``.
"""

from __future__ import annotations


class Metrics:
    """The process's measurements (docs/observability.md lists each metric); this base records nothing."""

    __slots__ = ()

    enabled = False
    """True when measurements go somewhere (skip timing work for them otherwise)."""

    def queue_accepted(self, agent: str, mode: str) -> None:
        """A message was durably accepted into ``agent``'s queue (``mode``: its queue mode)."""

    def queue_claimed(self, agent: str, wait_s: float) -> None:
        """A queue item was claimed for a run ``wait_s`` seconds after it was accepted."""

    def run_started(self, agent: str) -> None:
        """A run of ``agent`` started (runs in flight go up)."""

    def run_ended(self, agent: str, status: str, duration_s: float) -> None:
        """A run of ``agent`` ended with ``status`` (``completed``, ``failed``, ``aborted``…) after ``duration_s``."""

    def model_call(
        self,
        provider: str,
        model: str,
        *,
        duration_s: float,
        first_token_s: float | None,
        error_kind: str | None,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int,
        cache_write_tokens: int,
        cost_usd: float,
    ) -> None:
        """One model call ended: its time, time to the first content, tokens, cost and error kind (None: ok)."""

    def tool_call(self, tool: str, duration_s: float, *, failed: bool) -> None:
        """One tool call ended (``failed``: its result was an error)."""

    def failover(self, kind: str, reason: str) -> None:
        """Failover acted: ``kind`` is ``retry`` (another attempt/profile) or ``fallback`` (another model)."""

    def delivery(self, adapter: str, status: str) -> None:
        """A reply delivery to a chat adapter ended with ``status`` (``delivered``, ``partial``, ``failed``)."""

    def loop_lag(self, seconds: float) -> None:
        """The event loop ran a timer ``seconds`` late (how long something blocked it)."""


NOOP_METRICS = Metrics()
"""The measurements while metrics are off."""
