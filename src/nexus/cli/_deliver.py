"""``nexus send … --deliver NAME/ACCOUNT:TARGET`` and ``--wait``: following the reply of the sent message.

The target is kept with the message (``metadata.deliver_to``, as over HTTP and as an inbound chat
message's), and every broker delivers the stored targets of the runs it makes through its
:class:`~nexus.streaming.Deliverer` (router + ``deliveries`` row): the one in this process when
``nexus send`` drains, a running server's otherwise, the next drain's if this one was killed
first. :class:`LiveReply` prints the reply's tokens as they arrive, from the run the message's
receipt hands over. A failed delivery never touches the turn: the reply is in the ledger
whatever the adapter did.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TextIO

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.adapters import DeliveryTarget
    from nexus.broker import Followed
    from nexus.config import NexusConfig
    from nexus.streaming import StreamEvent


def parse_target(spec: str, config: NexusConfig) -> DeliveryTarget:
    """``NAME/ACCOUNT:TARGET`` → a target of a configured, enabled adapter account (ConfigError if not)."""
    from nexus.streaming import check_target
    from nexus.streaming import parse_target as parse

    return check_target(parse(spec), config.adapters, prefix="--deliver ")


@dataclass(slots=True)
class LiveReply:
    """Prints the reply of one execution to ``out`` as its tokens arrive."""

    out: TextIO
    printed: bool = False
    _line_open: bool = False

    async def follow(self, run: Awaitable[Followed | None]) -> None:
        """Print the text of the run a message is handed to (``receipt.follow()``), from its start to its end."""
        from nexus.adapters import DeliveryTarget
        from nexus.streaming import stream_events

        followed = await run
        if followed is None:
            return
        execution, subscription = followed
        async for event in stream_events(execution, DeliveryTarget("cli", "local", "stdout"), subscription):
            self._on_event(event)

    def _on_event(self, event: StreamEvent) -> None:
        from nexus.streaming import StreamEnd, Token

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
