"""The span interface every layer codes against, and the no-op span it is when tracing is off.

A :class:`Span` here is ours, not OpenTelemetry's: the no-op one costs a method call that
returns at once and needs no import; the recording one (:mod:`nexus.telemetry._otel`) wraps
an OpenTelemetry span. Trace context crosses process boundaries (a queue item's metadata, an
HTTP header) as a W3C ``traceparent`` string, so no OpenTelemetry type leaks into the layers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Literal, TypeAlias

AttributeValue: TypeAlias = "str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]"
"""What an attribute may hold (OpenTelemetry's primitive types and homogeneous sequences of them)."""

Attributes: TypeAlias = "Mapping[str, AttributeValue | None]"
"""Attributes by name; a ``None`` value is left out (so call sites need no ``if``)."""

SpanKind = Literal["internal", "client", "server", "producer", "consumer"]


class Span:
    """A unit of work in a trace; this base class records nothing (tracing off).

    Use it as a context manager (``with start_span(...) as span:``) to end it on exit; an
    exception leaving the block marks it failed. Or call :meth:`end` yourself.
    """

    __slots__ = ()

    @property
    def recording(self) -> bool:
        """True when attributes set on this span go anywhere (skip building costly ones otherwise)."""
        return False

    def set_name(self, name: str) -> None:
        """Rename the span (when its best name is known only once its work is done)."""

    def set_attribute(self, key: str, value: AttributeValue | None) -> None:
        """Set one attribute (``None`` is ignored)."""

    def set_attributes(self, attributes: Attributes) -> None:
        """Set several attributes (``None`` values are ignored)."""

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        """Record something that happened at a point in time during the span (a retry, a steer)."""

    def add_link(self, traceparent: str | None, attributes: Attributes | None = None) -> None:
        """Link another trace's span (a W3C ``traceparent``) to this one, e.g. a message a run read."""

    def fail(self, error_type: str, message: str | None = None) -> None:
        """Mark the span failed: status ERROR and ``error.type`` (the error's kind, never its secret text)."""

    def end(self, end_time_ns: int | None = None) -> None:
        """End the span (at ``end_time_ns``, Unix nanoseconds, when given); later calls do nothing."""

    def traceparent(self) -> str | None:
        """This span as a W3C ``traceparent`` (None when tracing is off): carry it to continue the trace."""
        return None

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None and not issubclass(exc_type, GeneratorExit):
            self.fail(exc_type.__name__)
        self.end()


NOOP_SPAN = Span()
"""The one span handed out while tracing is off."""

Links: TypeAlias = "Sequence[str | None]"
"""W3C ``traceparent`` strings to link; ``None`` entries are skipped."""
