"""Recording spans with the OpenTelemetry API (imported only once tracing is turned on).

Our :class:`~nexus.telemetry.Span` wraps an OpenTelemetry span; the current span lives in
OpenTelemetry's own context, so spans of other instrumentations in the same process (an
application's HTTP server, say) nest with ours. Trace context crosses boundaries as W3C
``traceparent`` strings, read and written by the W3C propagator of the API package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from nexus.telemetry._spans import NOOP_SPAN, Attributes, AttributeValue, Links, Span

TRACER_NAME = "nexus"

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "client": SpanKind.CLIENT,
    "server": SpanKind.SERVER,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_PROPAGATOR = TraceContextTextMapPropagator()


def _clean(attributes: Attributes | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return {key: value for key, value in attributes.items() if value is not None}


def _context_of(traceparent: str | None, tracestate: str | None = None) -> Any:
    """The OpenTelemetry context holding the remote span ``traceparent`` (None: not a valid one)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    found = _PROPAGATOR.extract(carrier, context=otel_context.Context())
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def _link(traceparent: str | None, attributes: Attributes | None = None) -> Link | None:
    found = _context_of(traceparent)
    if found is None:
        return None
    return Link(trace.get_current_span(found).get_span_context(), _clean(attributes) or None)


class OtelSpan(Span):
    """A recording span (see :class:`nexus.telemetry.Span` for the methods)."""

    __slots__ = ("otel",)

    def __init__(self, otel: trace.Span) -> None:
        self.otel = otel

    @property
    def recording(self) -> bool:
        return bool(self.otel.is_recording())

    def set_name(self, name: str) -> None:
        self.otel.update_name(name)

    def set_attribute(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self.otel.set_attribute(key, value)

    def set_attributes(self, attributes: Attributes) -> None:
        self.otel.set_attributes(_clean(attributes))

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        self.otel.add_event(name, _clean(attributes))

    def add_link(self, traceparent: str | None, attributes: Attributes | None = None) -> None:
        link = _link(traceparent, attributes)
        if link is not None:
            self.otel.add_link(link.context, link.attributes)

    def fail(self, error_type: str, message: str | None = None) -> None:
        self.otel.set_attribute("error.type", error_type)
        self.otel.set_status(Status(StatusCode.ERROR, message))

    def end(self, end_time_ns: int | None = None) -> None:
        self.otel.end(end_time_ns)

    def traceparent(self) -> str | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self.otel))
        return carrier.get("traceparent")


class OtelTracer:
    """Starts :class:`OtelSpan`s from a ``TracerProvider`` (the global one when none is given)."""

    __slots__ = ("_provider", "_tracer")

    def __init__(self, provider: Any = None) -> None:
        from nexus import __version__

        self._provider = provider
        source = provider if provider is not None else trace.get_tracer_provider()
        self._tracer = source.get_tracer(TRACER_NAME, __version__)

    def start_span(
        self,
        name: str,
        kind: str,
        attributes: Attributes | None,
        links: Links,
        parent: str | None,
        start_time_ns: int | None,
    ) -> Span:
        context = _context_of(parent) if parent else None
        found = [link for link in map(_link, links) if link is not None] if links else None
        span = self._tracer.start_span(
            name, context, _KINDS[kind], _clean(attributes), found, start_time_ns, record_exception=False
        )
        return OtelSpan(span)

    def current_span(self) -> Span:
        span = trace.get_current_span()
        return OtelSpan(span) if span.get_span_context().is_valid else NOOP_SPAN

    @contextmanager
    def use_span(self, span: Span) -> Iterator[Span]:
        assert isinstance(span, OtelSpan)
        token = otel_context.attach(trace.set_span_in_context(span.otel))
        try:
            yield span
        finally:
            otel_context.detach(token)

    @contextmanager
    def continue_trace(self, traceparent: str, tracestate: str | None) -> Iterator[None]:
        found = _context_of(traceparent, tracestate)
        if found is None:  # a malformed header starts a new trace, as the W3C spec says
            yield
            return
        token = otel_context.attach(found)
        try:
            yield
        finally:
            otel_context.detach(token)

    def log_ids(self) -> tuple[str, str] | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"{context.trace_id:032x}", f"{context.span_id:016x}"

    def shutdown(self) -> None:
        close = getattr(self._provider, "shutdown", None)
        if close is not None:
            close()
