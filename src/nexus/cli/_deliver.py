"""``nexus send … --deliver NAME/ACCOUNT:TARGET``: stream an agent's reply through a chat adapter.

The run that consumes the sent message is watched as it starts; its engine events become
seed-004 ``StreamEvent``s (the streaming bridge's mapper) and go to the adapter through the
router — natively to a ``stream``-capable adapter, in blocks to a send-only one. A failed
delivery never touches the turn: the reply is in the ledger whatever the adapter did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from nexus.errors import ConfigError

if TYPE_CHECKING:
    from nexus.adapters.types import DeliveryTarget
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.config import NexusConfig
    from nexus.streaming.router import DeliveryReport


def _console_target() -> DeliveryTarget:
    from nexus.adapters.types import DeliveryTarget

    return DeliveryTarget("console", "cli", "stdout")


def parse_target(spec: str, config: NexusConfig) -> DeliveryTarget:
    """``NAME/ACCOUNT:TARGET`` → a delivery target of a configured adapter account (ConfigError if not)."""
    from nexus.adapters.types import DeliveryTarget

    ref, sep, to = spec.partition(":")
    name, slash, account = ref.partition("/")
    if not sep or not slash or not name or not account or not to:
        raise ConfigError(f"--deliver {spec!r}: expected NAME/ACCOUNT:TARGET, e.g. tg/main:chat:12345")
    adapter = config.adapters.get(name)
    if adapter is None:
        known = ", ".join(sorted(config.adapters)) or "none: add one with nexus adapters register"
        raise ConfigError(f"--deliver: no adapter named {name!r} (configured: {known})")
    if account not in adapter.accounts:
        raise ConfigError(f"--deliver: adapter {name!r} has no account {account!r} (see nexus adapters list)")
    return DeliveryTarget(name, account, to)


@dataclass(slots=True)
class ItemRunWatch:
    """Finds the first run that consumes queue item ``item_id`` and hands it to ``matched`` once.

    Runs announce themselves through the runner's ``on_run`` hook, possibly before ``send`` has
    returned the item id: those are held until :meth:`watch` names the item.
    """

    matched: Callable[[EngineRunHandle], None]
    item_id: str | None = None
    found: bool = False
    _pending: list[EngineRunHandle] = field(default_factory=list)

    def on_run(self, handle: EngineRunHandle) -> None:
        """Runner hook (see :meth:`nexus.broker.engine_runner.EngineRunner.on_run`)."""
        if self.found:
            return
        if self.item_id is None:  # the run started before send() returned the item id
            self._pending.append(handle)
            return
        if self.item_id in handle.request.item_ids:
            self.found = True
            self.matched(handle)

    def watch(self, item_id: str) -> None:
        """The item to look for (known once ``send`` returned)."""
        self.item_id = item_id
        pending, self._pending = self._pending, []
        for handle in pending:
            self.on_run(handle)


@dataclass(slots=True)
class Delivery:
    """Delivers the run that consumes the watched item to ``target``; ``await finish()`` for the report."""

    config: NexusConfig
    target: DeliveryTarget
    task: asyncio.Task[DeliveryReport] | None = None
    runs: ItemRunWatch = field(init=False)

    def __post_init__(self) -> None:
        self.runs = ItemRunWatch(self._start)

    def _start(self, handle: EngineRunHandle) -> None:
        self.task = asyncio.get_running_loop().create_task(self._deliver(handle))

    async def finish(self) -> DeliveryReport | None:
        """The delivery's report (``None`` if no run consumed the item here)."""
        return None if self.task is None else await self.task

    async def _deliver(self, handle: EngineRunHandle) -> DeliveryReport:
        from nexus.adapters.manager import AdapterManager
        from nexus.ledger import new_ulid
        from nexus.streaming.from_engine import stream_events
        from nexus.streaming.router import StreamRouter

        queue: asyncio.Queue[object] = asyncio.Queue()
        done = object()
        handle.on_event(queue.put_nowait)
        ender = asyncio.get_running_loop().create_task(_signal_end(handle, queue, done))

        async def engine_events() -> AsyncIterator[object]:
            while (event := await queue.get()) is not done:
                yield getattr(event, "event", event)

        run_id = f"run-{new_ulid()}"
        label = handle.request.session_label
        events = stream_events(engine_events(), run_id=run_id, session_label=label, target=self.target)
        manager = AdapterManager(self.config.adapters, home=self.config.home)
        try:
            return await StreamRouter(manager).deliver(self.target, events, run_id=run_id, session_label=label)
        finally:
            await manager.close()
            await ender


async def _signal_end(handle: EngineRunHandle, queue: asyncio.Queue[object], done: object) -> None:
    try:
        await handle.result()
    finally:
        queue.put_nowait(done)


@dataclass(slots=True)
class LiveReply:
    """Prints the reply of the run that consumes the watched item to ``out`` as its tokens arrive."""

    out: TextIO
    printed: bool = False
    runs: ItemRunWatch = field(init=False)

    def __post_init__(self) -> None:
        self.runs = ItemRunWatch(self._print)

    def _print(self, handle: EngineRunHandle) -> None:
        from nexus.ledger import new_ulid
        from nexus.streaming.events import StreamEnd, Token
        from nexus.streaming.from_engine import EngineEventMapper

        mapper = EngineEventMapper(f"run-{new_ulid()}", handle.request.session_label, _console_target())
        line_open = False

        def on_event(event: object) -> None:
            nonlocal line_open
            for mapped in mapper.map(getattr(event, "event", event)):
                if type(mapped) is Token:
                    self.out.write(mapped.text)
                    self.out.flush()
                    self.printed = line_open = True
                elif type(mapped) is StreamEnd and not mapped.final and line_open:
                    self.out.write("\n")  # text before a tool call, then the next model call's text
                    line_open = False

        handle.on_event(on_event)

    def end(self) -> None:
        """End the printed reply with a newline (when anything was printed)."""
        if self.printed:
            self.out.write("\n")
            self.out.flush()
