"""Queue items in traces and metrics: a span when a message is accepted, one when it is claimed.

A message's trace outlives the process that accepted it: the accept span's context is stored
with the message (``metadata.traceparent``), so whichever process claims the item — after a
restart too — continues the same trace. Per item:

- ``accept {agent}`` (kind producer): the durable write, a child of whatever was current (an
  HTTP request's ``traceparent``, the tool call of the agent that sent it);
- ``queue {agent}``: from the accept to the claim, backdated to the item's accept time, a child
  of its accept span;

and the run that consumes a batch is a child of its first item's ``queue`` span, linked to the
others' (``nexus.telemetry.run_origin``). Only while telemetry is on; off, these are no-ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from nexus import telemetry
from nexus.broker.session_queue import QueuedMessage
from nexus.broker.types import AgentMessage

if TYPE_CHECKING:
    from nexus.ledger import AcceptRequest, QueueItem, QueueStore

TRACEPARENT = "traceparent"
"""The key of a message's ``metadata`` that holds its trace context."""


def accept_span(agent_id: str, session_label: str, message: AgentMessage, mode: str) -> telemetry.Span:
    """Start the accept span and store its context in ``message.metadata`` (before the message is written).

    Tracing off: the no-op span, with no name or attributes built for it (this runs for every message)."""
    if not telemetry.tracing():
        return telemetry.NOOP_SPAN
    span = telemetry.start_span(
        f"accept {agent_id}",
        kind="producer",
        attributes={
            "nexus.agent": agent_id,
            "nexus.session": session_label,
            "nexus.queue_mode": mode,
            "nexus.message_id": message.id,
            "nexus.sender": message.from_,
        },
    )
    traceparent = span.traceparent()
    if traceparent is not None:
        message.metadata[TRACEPARENT] = traceparent
    return span


async def traced_accept(queue: QueueStore, request: AcceptRequest, span: telemetry.Span) -> tuple[QueueItem, bool]:
    """The durable accept inside ``span`` (which it ends), counted once committed (a duplicate is not a new
    acceptance). The broker calls it only while telemetry observes; otherwise it accepts directly."""
    with span:
        row, created = await queue.accept(request)
        if created:
            telemetry.metrics().queue_accepted(request.agent_id, request.mode)
        span.set_attributes({"nexus.queue_item_id": row.id, "nexus.duplicate": not created})
    return row, created


def claimed(
    agent_id: str, session_label: str, items: Sequence[QueuedMessage], now_ms: Callable[[], int]
) -> AbstractContextManager[str | None]:
    """Around the start of a claimed batch's run: its items' ``queue`` spans, the claim latency.

    Inside, the first item's span is current and the others are handed to the run as links, so
    the run the block starts continues the first message's trace. Yields that span's context
    (the batch's replies to askers go on in the same trace). Nothing observed: one shared no-op
    context, no generator per batch (and no clock read: ``now_ms`` is read only for the spans).
    """
    if not telemetry.observing() or not items:
        return _UNTRACED
    return _claimed(agent_id, session_label, items, now_ms())


_UNTRACED: AbstractContextManager[None] = nullcontext()


@contextmanager
def _claimed(agent_id: str, session_label: str, items: Sequence[QueuedMessage], now_ms: int) -> Iterator[str | None]:
    metrics = telemetry.metrics()
    spans = []
    for item in items:
        metrics.queue_claimed(agent_id, (now_ms - item.enqueued_at_ms) / 1000)
        span = telemetry.start_span(
            f"queue {agent_id}",
            parent=item.traceparent,
            start_time_ns=item.enqueued_at_ms * 1_000_000,
            attributes={
                "nexus.agent": agent_id,
                "nexus.session": session_label,
                "nexus.queue_mode": item.mode,
                "nexus.queue_item_id": item.item_id,
                "nexus.message_id": item.message_id,
                "nexus.attempts": item.cut_runs + 1,
            },
        )
        span.end(now_ms * 1_000_000)
        spans.append(span)
    first = spans[0]
    origin = {"nexus.queue_mode": items[0].mode, "nexus.queue_items": len(items)}
    with telemetry.use_span(first), telemetry.run_origin([span.traceparent() for span in spans[1:]], origin):
        yield first.traceparent()
