"""``nexus send … --deliver NAME/ACCOUNT:TARGET`` and ``--wait``: following the reply of the sent message.

The broker's :meth:`~nexus.broker.AgentBroker.execute` gives the run that consumes the message
as a ``BrokerExecution``; ``--deliver`` hands it to the shared
:class:`~nexus.broker.delivery.Deliverer` (router + ``deliveries`` row), and :class:`LiveReply`
prints its tokens as they arrive. A failed delivery never touches the turn: the reply is in the
ledger whatever the adapter did.

The target is kept with the message (``metadata.deliver_to``, as over HTTP), and every broker the
CLI runs (:func:`delivering_broker`) delivers the stored targets of the runs it makes: a
``--deliver`` message whose ``nexus send`` was killed before its run ended is delivered by the
next drain, and so is the reply to an inbound chat message a CLI drain runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TextIO

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.adapters.types import DeliveryTarget
    from nexus.broker import AgentBroker
    from nexus.broker.delivery import Deliverer
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.broker.execution import BrokerStreamHandle
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger
    from nexus.streaming.events import StreamEvent


def parse_target(spec: str, config: NexusConfig) -> DeliveryTarget:
    """``NAME/ACCOUNT:TARGET`` → a target of a configured, enabled adapter account (ConfigError if not)."""
    from nexus.streaming.targets import check_target
    from nexus.streaming.targets import parse_target as parse

    return check_target(parse(spec), config.adapters, prefix="--deliver ")


@dataclass(slots=True)
class LiveReply:
    """Prints the reply of one execution to ``out`` as its tokens arrive."""

    out: TextIO
    printed: bool = False
    _line_open: bool = False

    def follow(self, stream: BrokerStreamHandle) -> None:
        """Print ``stream``'s text from now on."""
        stream.on_event(self._on_event)

    def _on_event(self, event: StreamEvent) -> None:
        from nexus.streaming.events import StreamEnd, Token

        if type(event) is Token:
            self.out.write(event.text)
            self.out.flush()
            self.printed = self._line_open = True
        elif type(event) is StreamEnd and not event.final and self._line_open:
            self.out.write("\n")  # text before a tool call, then the next model call's text
            self._line_open = False

    def end(self) -> None:
        """End the printed reply with a newline (when anything was printed)."""
        if self.printed:
            self.out.write("\n")
            self.out.flush()


@contextlib.asynccontextmanager
async def delivering_broker(
    config: NexusConfig,
    ledger: Ledger,
    *,
    scope: set[str] | None = None,
    on_run: Callable[[EngineRunHandle], object] | None = None,
    live_owner: str | None = None,
) -> AsyncIterator[tuple[AgentBroker, Deliverer | None]]:
    """``running_broker`` whose runs deliver their stored reply targets (``None``: no adapters configured).

    Except the targets ``live_owner`` (this process) delivers live. The deliverer is closed after
    the broker, so deliveries of runs that ended as it closed are finished and recorded.
    """
    from nexus.broker.delivery import Deliverer, stored_target_delivery
    from nexus.broker.host import running_broker

    deliverer = Deliverer.from_config(config, ledger) if config.adapters else None
    hooks = [hook for hook in (on_run, deliverer and stored_target_delivery(deliverer, live_owner=live_owner)) if hook]

    def announce(run: EngineRunHandle) -> None:
        for hook in hooks:
            hook(run)

    try:
        async with running_broker(config, ledger, scope=scope, on_run=announce if hooks else None) as broker:
            yield broker, deliverer
    finally:
        if deliverer is not None:
            await deliverer.close()
