"""``GET /metrics``: the process's Prometheus metrics, plus what this server reads at scrape time.

Behind the same guards as every route (tokens, the Host and Origin checks); ``[telemetry]
metrics_token`` is a token accepted here only, so a scraper holds no key to the API. 404 when
metrics are off (``[telemetry] metrics = false``, or an app built without ``nexus serve``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request, Response

from nexus import telemetry
from nexus.server._errors import ApiError
from nexus.server._guard import METRICS_PATH
from nexus.server._openapi import answers
from nexus.server._state import ServerState

MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter(tags=["health"])


@router.get(
    METRICS_PATH,
    summary="Prometheus metrics (text format): queues, runs, models, tools, deliveries, streams, loop lag",
    response_class=Response,
    responses=answers(None, 404, media=MEDIA_TYPE),
)
async def metrics_text(request: Request) -> Response:
    # async: the live gauges read the broker's in-memory state, which lives on the event loop
    recorder = telemetry.metrics()
    exposition = getattr(recorder, "exposition", None)
    if not recorder.enabled or exposition is None:
        raise ApiError(404, "not_found", "metrics are off in this server: set [telemetry] metrics = true")
    state: ServerState = request.app.state.nexus
    return Response(exposition([LiveGauges(state)]), media_type=MEDIA_TYPE)


class LiveGauges:
    """Gauges read when scraped: queue depth per agent (the live broker's) and open event streams."""

    def __init__(self, state: ServerState) -> None:
        self._state = state

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from nexus.telemetry import agent_label

        depth = GaugeMetricFamily("nexus_queue_depth", "Messages waiting or running, per agent", labels=["agent"])
        by_agent: dict[str, int] = {}
        broker = self._state.broker
        for agent in broker.list_agents() if broker is not None else ():
            label = agent_label(agent.identity.agent_id)
            by_agent[label] = by_agent.get(label, 0) + agent.queue_depth
        for label, count in sorted(by_agent.items()):
            depth.add_metric([label], count)
        yield depth
        events = self._state.events
        yield GaugeMetricFamily(
            "nexus_sse_subscribers", "Open event streams (all sessions)", value=events.subscriber_count if events else 0
        )
