"""Every broker run of ``nexus serve``, live on its session's event stream (``/v1/sessions/{label}/events``).

The runner announces each run (:meth:`EngineRunner.on_run`); its engine events are mapped to
seed-004 ``StreamEvent``s by the streaming bridge's one mapper and published into the
:class:`EventHub` under the session's own label, where the web UI and any SSE client read them.
Publishing never waits for a reader (the hub keeps a bounded log per session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nexus.adapters.types import DeliveryTarget
from nexus.streaming.from_engine import EngineEventMapper

if TYPE_CHECKING:
    from nexus.broker.engine_runner import EngineRunHandle, EngineRunner
    from nexus.server._event_hub import EventHub

WEB_CHANNEL = "web"
"""The ``target.channel`` of a run watched over the server's event stream."""


def publish_runs(runner: EngineRunner, hub: EventHub) -> Callable[[], None]:
    """Publish the StreamEvents of every run ``runner`` starts; returns a function that stops it."""

    def watch(handle: EngineRunHandle) -> None:
        from nexus.ledger import new_ulid

        label = handle.request.session_label
        target = DeliveryTarget(WEB_CHANNEL, "server", label)
        mapper = EngineEventMapper(f"run-{new_ulid()}", label, target)

        def on_event(event: object) -> None:
            for mapped in mapper.map(getattr(event, "event", event)):
                hub.publish(label, mapped.type, mapped.to_json())

        handle.on_event(on_event)

    return runner.on_run(watch)
