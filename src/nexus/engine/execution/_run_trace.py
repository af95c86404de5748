"""A run as a span, as metrics and as a log line; failover's retries and fallbacks as span events.

The hook is small on purpose, so it follows the run's one handle wherever the run starts:
:func:`observed_run` wraps the coroutine that drives an :class:`~nexus.engine.Execution` (its own
task, started by ``Execution._drive``: ``Runtime.start`` and ``execute`` alike), and only
while someone listens — tracing or metrics on, or ``INFO`` logs enabled — otherwise it hands
the coroutine back untouched.

The span ``invoke_agent {agent}`` (GenAI conventions; ``nexus run`` and ``nexus chat`` run the
agent ``main``; plain ``invoke_agent`` for a context executed by hand, with no agent) is current
for the whole run, so the model-call and tool-call spans hang under it.
Its parent is whatever was current when the run was started: the broker makes that the queue
item's span (``queue {agent}``), an HTTP request its ``traceparent``, a tool its own span for a
sub-agent. Links and attributes the starter handed over with
:func:`nexus.telemetry.run_origin` (the messages a batch consumed, the queue mode) are taken here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from nexus import telemetry
from nexus._dataclass import dataclass
from nexus.engine.types import AgentResult, AssembledContext, EngineEvent, FallbackEvent, RetryEvent

log = logging.getLogger("nexus.run")

_FAILED = frozenset({"error", "timeout"})


@dataclass(slots=True, frozen=True)
class RunIdentity:
    """What a run is known by from its start, before its context is assembled (the handle's fields)."""

    run_id: str
    session_label: str
    agent_id: str
    context: Callable[[], AssembledContext | None]
    """The assembled context once there is one (its model, provider and message source)."""


def listening() -> bool:
    """Whether anyone listens to runs (tracing or metrics on, or ``INFO`` logs): else a run is not wrapped."""
    return telemetry.observing() or log.isEnabledFor(logging.INFO)


def observed_run(main: Coroutine[Any, Any, AgentResult], run: RunIdentity) -> Coroutine[Any, Any, AgentResult]:
    """``main`` traced, measured and logged when anyone listens (:func:`listening`); ``main`` itself otherwise."""
    if not listening():
        return main
    return _observed(main, run)


async def _observed(main: Coroutine[Any, Any, AgentResult], run: RunIdentity) -> AgentResult:
    links, handed = telemetry.take_run_origin()
    agent = run.agent_id
    span = telemetry.start_span(
        f"invoke_agent {agent}" if agent else "invoke_agent",  # `execute()` of a context built by hand: no agent
        links=links,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent or None,
            "gen_ai.conversation.id": run.session_label,
            "nexus.agent": run.agent_id or None,
            "nexus.session": run.session_label,
            "nexus.run_id": run.run_id,
            **handed,
        },
    )
    metrics = telemetry.metrics()
    label = run.agent_id or "(none)"  # no agent (`execute()` by hand): not one series per session
    metrics.run_started(label)
    started = time.perf_counter()
    try:
        with telemetry.use_span(span):
            result = await main
    except BaseException as exc:  # a bug, or the task cancelled from outside: the run wrote no result
        metrics.run_ended(label, "crashed", time.perf_counter() - started)
        span.fail(type(exc).__name__)
        span.end()
        raise
    duration = time.perf_counter() - started
    metrics.run_ended(label, result.stop_reason, duration)
    ctx = run.context()
    if span.recording:
        _set_result(span, result, ctx)
    with telemetry.use_span(span):  # the log line carries the run's trace id
        _log_end(run, result, duration)
    span.end()
    return result


def _set_result(span: telemetry.Span, result: AgentResult, ctx: AssembledContext | None) -> None:
    """The model asked, the turn, its usage and cost, and how it ended."""
    usage = result.usage
    span.set_attributes(
        {
            "gen_ai.provider.name": ctx.provider if ctx is not None else None,
            "gen_ai.request.model": ctx.model if ctx is not None else None,
            "nexus.message_source": ctx.source if ctx is not None else None,
            "nexus.turn_id": result.turn_id,
            "nexus.stop_reason": result.stop_reason,
            "gen_ai.usage.input_tokens": usage.input + usage.cache_read + usage.cache_write,
            "gen_ai.usage.output_tokens": usage.output,
            "nexus.cost_usd": usage.cost.total,
            "nexus.tool_calls": len(result.tool_calls),
            "nexus.compactions": len(result.compactions) or None,
        }
    )
    if result.stop_reason in _FAILED:
        error = result.error
        span.fail(error.kind if error is not None else result.stop_reason, error.message if error else None)


def _log_end(run: RunIdentity, result: AgentResult, duration_s: float) -> None:
    usage = result.usage
    # failure_level through the face: its module (telemetry.logs, the log formats) is loaded by a failed run only
    level = telemetry.failure_level(log) if result.stop_reason in _FAILED else logging.INFO
    fields = {
        "event": "run_end",
        "agent": run.agent_id or None,
        "session": run.session_label,
        "run_id": run.run_id,
        "turn_id": result.turn_id,
        "stop_reason": result.stop_reason,
        "duration_s": round(duration_s, 3),
        "input_tokens": usage.input + usage.cache_read + usage.cache_write,
        "output_tokens": usage.output,
        "cost_usd": usage.cost.total,
    }
    if result.error is not None:
        fields["error_kind"] = result.error.kind
        fields["error"] = result.error.message
    log.log(level, "run ended: %s", result.stop_reason, extra={"fields": fields})


def record_failover(event: EngineEvent) -> None:
    """A retry or fallback: a metric, and an event on the current span (the run's)."""
    if isinstance(event, RetryEvent):
        telemetry.metrics().failover("retry", event.error_kind)
        telemetry.current_span().add_event(
            "nexus.failover.retry",
            {
                "nexus.attempt": event.attempt,
                "nexus.auth_profile": event.profile,
                "nexus.next_auth_profile": event.next_profile,
                "gen_ai.request.model": event.model,
                "error.type": event.error_kind,
                "nexus.delay_s": event.delay_s,
            },
        )
        log.info(
            "model call failed (%s); retrying", event.error_kind,
            extra={"fields": {"event": "retry", "model": event.model, "profile": event.profile,
                              "next_profile": event.next_profile, "delay_s": event.delay_s, "error": event.message}},
        )  # fmt: skip
    elif isinstance(event, FallbackEvent):
        telemetry.metrics().failover("fallback", event.reason)
        telemetry.current_span().add_event(
            "nexus.failover.fallback",
            {"nexus.from_model": event.from_model, "nexus.to_model": event.to_model,
             "error.type": event.reason, "nexus.skipped": event.skipped},
        )  # fmt: skip
        log.info(
            "falling back from %s to %s (%s)", event.from_model, event.to_model, event.reason,
            extra={"fields": {"event": "fallback", "skipped": event.skipped}},
        )  # fmt: skip
