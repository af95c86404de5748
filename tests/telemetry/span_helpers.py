"""Recording spans in memory (the OpenTelemetry SDK's own exporter) and reading them as a tree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nexus import telemetry


@contextmanager
def recorded_spans(*, capture_content: bool = False) -> Iterator[InMemorySpanExporter]:
    """Tracing on, every ended span kept in the yielded exporter; off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable_tracing(provider, capture_content=capture_content)
    try:
        yield exporter
    finally:
        telemetry.disable()
        provider.shutdown()


@dataclass
class Node:
    """A span and its children, in start order."""

    span: ReadableSpan
    children: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.span.attributes or {})

    def child_names(self) -> list[str]:
        return [child.name for child in self.children]

    def only(self, name: str) -> Node:
        """The one child named ``name`` (fails when there are none or several)."""
        (found,) = [child for child in self.children if child.name == name or child.name.startswith(name + " ")]
        return found

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


def span_tree(spans: Sequence[ReadableSpan]) -> list[Node]:
    """The roots of ``spans`` with their children attached (by parent span id), each level in start order."""
    nodes = {span.context.span_id: Node(span) for span in spans if span.context is not None}
    roots: list[Node] = []
    for node in sorted(nodes.values(), key=lambda n: n.span.start_time or 0):
        parent = node.span.parent
        if parent is not None and parent.span_id in nodes:
            nodes[parent.span_id].children.append(node)
        else:
            roots.append(node)
    return roots
