"""One broker per ``$NEXUS_HOME``: the process lock, and the wiring from config to a running broker.

Two processes draining the same queues would run the same message twice, so whoever drains
(``nexus queue drain``, ``nexus send`` when nothing else drains, later ``nexus serve``) first
takes an exclusive ``flock`` on ``broker.lock`` beside the ledger. The lock dies with its
process (even a SIGKILLed one), so a crashed broker never blocks the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nexus.broker.broker import AgentBroker
from nexus.broker.engine_runner import EngineRunner
from nexus.broker.from_config import broker_settings, configured_agents

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger
    from nexus.llm.options import StreamFn

LOCK_FILE_NAME = "broker.lock"


def lock_path(config: NexusConfig) -> Path:
    """Where the broker lock of this configuration's ledger lives."""
    return config.database_path.with_name(LOCK_FILE_NAME)


@contextlib.contextmanager
def broker_lock(config: NexusConfig) -> Iterator[bool]:
    """Hold the broker lock for the block; yields False (and holds nothing) when another process has it."""
    path = lock_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def build_broker(
    config: NexusConfig, ledger: Ledger, *, stream_fn: StreamFn | None = None, scope: set[str] | None = None
) -> AgentBroker:
    """A broker on the engine for this config (``[broker]`` settings); ``scope`` as in :class:`AgentBroker`."""
    from nexus.engine.runner import EngineEnv
    from nexus.ledger.broker_store import BrokerStore

    env = EngineEnv.from_config(config, ledger, stream_fn=stream_fn)
    runner = EngineRunner(env, max_hops=config.broker.max_hops)
    broker = AgentBroker(BrokerStore(ledger.database), runner, broker_settings(config.broker), scope=scope)
    runner.attach(broker)
    return broker


async def start_broker(config: NexusConfig, broker: AgentBroker) -> None:
    """Register the agents ``nexus.toml`` declares, then start ``broker`` (reload and drain)."""
    for agent in configured_agents(config.agents):
        broker.register_agent(agent.identity, spec=agent.spec, queue=agent.queue)
    await broker.start()
