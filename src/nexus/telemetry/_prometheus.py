"""Metrics recorded with ``prometheus_client`` (imported only once metrics are turned on).

``prometheus_client`` directly rather than OpenTelemetry's Prometheus exporter: that exporter
is the OpenTelemetry SDK's metrics pipeline on top of ``prometheus_client`` itself, so it can
only cost more per measurement and per import. Every metric lives in a registry of this
process's own (not the library's global one), and ``/metrics`` renders it together with the
gauges its server reads at scrape time (queue depth, SSE subscribers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from nexus.telemetry._metrics_api import Metrics
from nexus.telemetry.labels import agent_label

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text format's media type."""

_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
_RUN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
_MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)
_TOOL_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 120.0, 600.0)
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
_TOKEN_TYPES = ("input", "output", "cache_read", "cache_write")


class PrometheusMetrics(Metrics):
    """The measurements of :class:`~nexus.telemetry.Metrics` as Prometheus counters, gauges and histograms."""

    __slots__ = (
        "accepted",
        "claim_latency",
        "cost",
        "deliveries",
        "failovers",
        "first_token",
        "loop_lag_seconds",
        "model_calls",
        "model_duration",
        "provider_errors",
        "registry",
        "run_duration",
        "runs_in_flight",
        "tokens",
        "tool_duration",
        "tool_errors",
    )

    enabled = True

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def histogram(name: str, doc: str, buckets: tuple[float, ...], *labels: str) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r)

        self.accepted = counter("nexus_queue_accepted", "Messages durably accepted", "agent", "mode")
        self.claim_latency = histogram("nexus_queue_claim_latency_seconds", "Accept to claim", _WAIT_BUCKETS, "agent")
        self.runs_in_flight = Gauge("nexus_runs_in_flight", "Runs started and not ended", ["agent"], registry=r)
        self.run_duration = histogram("nexus_run_duration_seconds", "Runs", _RUN_BUCKETS, "agent", "status")
        self.model_calls = counter("nexus_model_calls", "Model calls (each attempt)", "provider", "model")
        self.model_duration = histogram(
            "nexus_model_call_duration_seconds", "Request to last event", _MODEL_BUCKETS, "provider", "model"
        )
        self.first_token = histogram(
            "nexus_first_token_latency_seconds", "Request to first content", _MODEL_BUCKETS, "provider", "model"
        )
        self.tokens = counter("nexus_model_tokens", "Tokens by type", "provider", "model", "type")
        self.cost = counter("nexus_model_cost_usd", "Cost at the catalog's prices", "provider", "model")
        self.provider_errors = counter("nexus_provider_errors", "Failed model calls by kind", "provider", "kind")
        self.tool_duration = histogram("nexus_tool_call_duration_seconds", "Tool calls", _TOOL_BUCKETS, "tool")
        self.tool_errors = counter("nexus_tool_call_errors", "Tool calls whose result was an error", "tool")
        self.failovers = counter("nexus_failovers", "Failover retries and model fallbacks", "kind", "reason")
        self.deliveries = counter("nexus_adapter_deliveries", "Reply deliveries to chat adapters", "adapter", "status")
        self.loop_lag_seconds = histogram("nexus_event_loop_lag_seconds", "How late a timer ran", _LAG_BUCKETS)

    def queue_accepted(self, agent: str, mode: str) -> None:
        self.accepted.labels(agent_label(agent), mode).inc()

    def queue_claimed(self, agent: str, wait_s: float) -> None:
        self.claim_latency.labels(agent_label(agent)).observe(max(0.0, wait_s))

    def run_started(self, agent: str) -> None:
        self.runs_in_flight.labels(agent_label(agent)).inc()

    def run_ended(self, agent: str, status: str, duration_s: float) -> None:
        label = agent_label(agent)
        self.runs_in_flight.labels(label).dec()
        self.run_duration.labels(label, status).observe(duration_s)

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
        self.model_calls.labels(provider, model).inc()
        self.model_duration.labels(provider, model).observe(duration_s)
        if first_token_s is not None:
            self.first_token.labels(provider, model).observe(first_token_s)
        if error_kind is not None:
            self.provider_errors.labels(provider, error_kind).inc()
        counts = (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
        for kind, count in zip(_TOKEN_TYPES, counts, strict=True):
            if count:
                self.tokens.labels(provider, model, kind).inc(count)
        if cost_usd:
            self.cost.labels(provider, model).inc(cost_usd)

    def tool_call(self, tool: str, duration_s: float, *, failed: bool) -> None:
        self.tool_duration.labels(tool).observe(duration_s)
        if failed:
            self.tool_errors.labels(tool).inc()

    def failover(self, kind: str, reason: str) -> None:
        self.failovers.labels(kind, reason).inc()

    def delivery(self, adapter: str, status: str) -> None:
        self.deliveries.labels(adapter, status).inc()

    def loop_lag(self, seconds: float) -> None:
        self.loop_lag_seconds.observe(max(0.0, seconds))

    def exposition(self, live: Iterable[Any] = ()) -> bytes:
        """The Prometheus text of every metric, plus those of ``live`` collectors (read now)."""
        if not live:
            return bytes(generate_latest(self.registry))
        scrape = CollectorRegistry(auto_describe=False)
        scrape.register(_Forward(self.registry))
        for collector in live:
            scrape.register(collector)
        return bytes(generate_latest(scrape))


class _Forward:
    """A collector yielding another registry's metrics (to render them beside scrape-time ones)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Any]:
        return self._registry.collect()
