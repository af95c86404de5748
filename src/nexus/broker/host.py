"""One broker per ``$NEXUS_HOME``: the process lock, and the wiring from config to a running broker.

Two processes draining the same queues would run the same message twice, so whoever drains
(``nexus queue drain``, ``nexus send`` when nothing else drains, later ``nexus serve``) first
takes an exclusive ``flock`` on ``broker.lock`` beside the ledger (beside the file a symlink
names: one database, one lock). The lock dies with its
process (even a SIGKILLed one), so a crashed broker never blocks the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nexus.broker.broker import AgentBroker
from nexus.broker.engine_runner import EngineRunner
from nexus.broker.from_config import ConfiguredAgent, broker_settings
from nexus.broker.smart import SmartRouting

if TYPE_CHECKING:
    from collections.abc import Callable

    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerStore
    from nexus.llm.options import StreamFn

LOCK_FILE_NAME = "broker.lock"


def lock_path(config: NexusConfig) -> Path:
    """Where the broker lock of this configuration's ledger lives: beside the real database file, so a
    ``NEXUS_HOME`` whose ``agents.db`` is a symlink to another's shares that one's lock."""
    from nexus.config import database_dir

    return database_dir(config.database_path) / LOCK_FILE_NAME


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
    config: NexusConfig,
    ledger: Ledger,
    *,
    stream_fn: StreamFn | None = None,
    scope: set[str] | None = None,
    on_run: Callable[[EngineRunHandle], object] | None = None,
) -> AgentBroker:
    """A broker on the engine for this config (``[broker]`` settings); ``scope`` as in :class:`AgentBroker`;
    ``on_run`` is told about every run as it starts (to watch or deliver its events)."""
    return build_broker_and_runner(config, ledger, stream_fn=stream_fn, scope=scope, on_run=on_run)[0]


def build_broker_and_runner(
    config: NexusConfig,
    ledger: Ledger,
    *,
    stream_fn: StreamFn | None = None,
    scope: set[str] | None = None,
    on_run: Callable[[EngineRunHandle], object] | None = None,
) -> tuple[AgentBroker, EngineRunner]:
    """:func:`build_broker`, also returning the runner (the server watches its runs)."""
    from nexus.engine.wiring.runner import EngineEnv
    from nexus.ledger.broker_store import BrokerStore

    # turns a killed process left open are closed (aborted, with what they journaled) before the
    # broker starts: a session whose queue is empty now would otherwise never run again to close them
    ledger.recover()
    env = EngineEnv.from_config(config, ledger, stream_fn=stream_fn)
    runner = EngineRunner(env, max_hops=config.broker.max_hops)
    if on_run is not None:
        runner.on_run(on_run)
    broker = AgentBroker(
        BrokerStore(ledger.database),
        runner,
        broker_settings(config.broker),
        scope=scope,
        reply_text=lambda turn_id: turn_reply(ledger, turn_id),
    )
    runner.attach(broker)
    broker.use_router(SmartRouting.from_config(config, ledger))  # built on first use only
    return broker, runner


def checked_agents(config: NexusConfig) -> list[ConfiguredAgent]:
    """The ``[agents.<id>]`` tables, or a ConfigError naming ``file:line`` of each problem
    (:func:`~nexus.broker._config_check.agent_problems`): a model no run could reach, a session two
    tables share or the API could not address, an unknown tool.

    The same checks as ``nexus agents add`` and ``POST /v1/agents``: an agent declared with
    ``model = "nope/zzz"`` would accept every message and fail each run, so nothing starts with it.
    """
    from nexus.broker._config_check import agent_problems
    from nexus.errors import ConfigError

    agents, problems = agent_problems(config)
    if problems:
        count = len(problems)
        raise ConfigError("\n".join([f"invalid config ({count} problem{'s' if count != 1 else ''}):", *problems]))
    return agents


def sync_configured_agents(config: NexusConfig, store: BrokerStore) -> None:
    """Persist the agents ``nexus.toml`` declares (``[agents.<id>]``), so every command sees them.

    A declared agent is registered (or updated to match the file) whenever a command opens the
    registry; its queue settings live in the file and apply when a broker runs it.
    """
    for agent in checked_agents(config):
        stored = store.get_agent(agent.identity.agent_id)
        if stored is None or stored.role != agent.identity.role or stored.spec != agent.spec:
            store.save_agent(
                agent.identity.agent_id,
                role=agent.identity.role,
                session_label=agent.identity.session_label,
                spec=agent.spec,
            )


def turn_reply(ledger: Ledger, turn_id: str) -> str | None:
    """The text of a turn's last assistant message, or ``None``."""
    for stored in reversed(ledger.messages(turn_id)):
        if stored.role == "assistant":
            text = "".join(getattr(block, "text", "") for block in stored.message.content)
            if text:
                return text
    return None


async def start_broker(config: NexusConfig, broker: AgentBroker) -> None:
    """Register the agents ``nexus.toml`` declares, then start ``broker`` (reload and drain)."""
    for agent in checked_agents(config):
        broker.register_agent(agent.identity, spec=agent.spec, queue=agent.queue)
    await broker.start()


@contextlib.asynccontextmanager
async def running_broker(
    config: NexusConfig,
    ledger: Ledger,
    *,
    stream_fn: StreamFn | None = None,
    scope: set[str] | None = None,
    on_run: Callable[[EngineRunHandle], object] | None = None,
) -> AsyncIterator[AgentBroker]:
    """A started broker for the block (see :func:`build_broker`); closed at its end, whatever happens.

    WAL checkpoints run on their own thread meanwhile, off the loop (``nexus.ledger._checkpoint``).
    """
    from nexus.ledger._checkpoint import background_checkpoints

    broker = build_broker(config, ledger, stream_fn=stream_fn, scope=scope, on_run=on_run)
    with background_checkpoints(ledger.database):
        await start_broker(config, broker)
        try:
            yield broker
        finally:
            await broker.close()
            await broker.close_routing()
