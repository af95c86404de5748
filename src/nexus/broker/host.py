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

from nexus._dataclass import dataclass
from nexus.broker.broker import AgentBroker
from nexus.broker.from_config import ConfiguredAgent, broker_settings
from nexus.broker.inbound import InboundRouter, inbound_routes
from nexus.broker.smart import SmartRouting

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.engine import Runtime
    from nexus.ledger import AgentRow, BrokerStore, Ledger
    from nexus.llm import StreamFn
    from nexus.streaming import Deliverer

LOCK_FILE_NAME = "broker.lock"


def lock_path(config: NexusConfig) -> Path:
    """Where the broker lock of this configuration's ledger lives: beside the real database file, so a
    ``NEXUS_HOME`` whose ``agents.db`` is a symlink to another's shares that one's lock."""
    from nexus.config import database_dir

    return database_dir(config.database_target) / LOCK_FILE_NAME


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


def broker_lock_held(config: NexusConfig) -> bool:
    """Whether a process holds this configuration's broker lock now (a drain runs), asked without taking it:
    a shared lock is refused while the exclusive one is held, and nothing is written to the lock file."""
    try:
        fd = os.open(lock_path(config), os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:  # cannot tell (no permission): assume a drain runs, and say nothing of the items
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of the shared lock if it was granted
    return False


@dataclass(slots=True)
class BrokerHost:
    """What a process that drains the queues runs: the engine's runtime, the broker on it, the deliverer of
    reply targets (``None``: no adapters configured) and the monitors of inbound chat (``None``: none)."""

    runtime: Runtime
    broker: AgentBroker
    deliverer: Deliverer | None = None
    inbound: InboundRouter | None = None
    ledger: Ledger | None = None
    """The ledger the host runs on: told when the host stops (:meth:`Ledger.stopping`)."""

    async def wait_until_idle(self) -> None:
        """Until the broker has nothing left to run and every delivery of its runs has ended (and is recorded).

        A command that drains and exits waits here, not on the broker alone: a reply whose adapter
        confirms it late (within the router's own bound) would otherwise be cut by :meth:`close`'s
        shorter grace and never recorded.
        """
        await self.broker.wait_until_idle()
        if self.deliverer is not None:
            await self.deliverer.wait()

    async def close(self) -> None:
        """Stop draining (active runs are aborted and kept), then the monitors, then deliveries and adapters,
        then what the runs shared (the runtime's MCP servers). On PostgreSQL the stop waits for an unreachable
        server a bounded time (:meth:`Ledger.stopping`)."""
        if self.ledger is not None:
            self.ledger.stopping()
        await self.broker.close()
        await self.broker.close_routing()  # the index worker stops, the router's connection closes
        if self.inbound is not None:
            await self.inbound.close()
        if self.deliverer is not None:
            await self.deliverer.close()  # runs are aborted: deliveries end, are recorded, adapters stop
        await self.runtime.aclose()


def build_host(
    config: NexusConfig,
    ledger: Ledger,
    *,
    stream_fn: StreamFn | None = None,
    scope: set[str] | None = None,
    monitors: bool = False,
) -> BrokerHost:
    """The broker on the engine for this config (``[broker]`` settings; ``scope`` as in :class:`AgentBroker`),
    delivering the reply targets stored with messages through one :class:`~nexus.streaming.Deliverer`;
    with ``monitors``, the inbound chat monitors too (started by :func:`start_host`)."""
    from nexus.broker.spawner import BrokerSpawner
    from nexus.engine import Runtime

    runtime = Runtime(config, ledger, stream_fn)
    deliverer = None
    if config.adapters:
        from nexus.streaming import Deliverer

        deliverer = Deliverer.from_config(config, ledger)
    broker = AgentBroker(
        ledger,
        runtime,
        broker_settings(config.broker),
        scope=scope,
        reply_text=lambda turn_id: turn_reply(ledger, turn_id),
        deliver=deliverer.deliver_stored if deliverer is not None else None,
    )
    runtime.spawner = BrokerSpawner(broker)  # a spawn_agent worker is a broker agent
    broker.use_router(SmartRouting.from_config(config, ledger))  # the router is built on first use only
    inbound = None
    if monitors and deliverer is not None and inbound_routes(config.adapters):
        inbound = InboundRouter(broker, deliverer.router.manager)
    return BrokerHost(runtime, broker, deliverer, inbound, ledger)


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


def sync_configured_agents(config: NexusConfig, store: BrokerStore) -> list[tuple[ConfiguredAgent, AgentRow]]:
    """Persist the agents ``nexus.toml`` declares (``[agents.<id>]``), so every command sees them; returns
    each with its registry row.

    Whenever a command opens the registry, each table's keys are applied to the agent as ``nexus agents
    add`` applies its flags (:class:`~nexus.broker.from_config.DeclaredKeys`: keys the table leaves out
    keep their stored values); nothing is written when the registry already agrees. Its queue settings
    live in the file and apply when a broker runs it. A ``session`` another registered agent talks in is
    a ConfigError at the table's ``file:line`` (exit 2), nothing written.
    """
    from nexus.broker.from_config import declared_keys
    from nexus.errors import ConfigError
    from nexus.ledger import AgentSessionTakenError, agent_update

    declared: list[tuple[ConfiguredAgent, AgentRow]] = []
    for agent in checked_agents(config):
        agent_id = agent.identity.agent_id
        keys = declared_keys(config.agents[agent_id])
        row = store.get_agent(agent_id)
        applied = agent_update(row, agent_id, keys.role, keys.session_label, keys.spec)
        if row is None or applied != (row.role, row.session_label, row.spec):
            try:
                row = store.add_agent(agent_id, role=keys.role, session_label=keys.session_label, spec=keys.spec)
            except AgentSessionTakenError as exc:
                where = config.where("agents", agent_id, "session")
                raise ConfigError(f"invalid config (1 problem):\n{where}: agents.{agent_id}.session: {exc}") from exc
        declared.append((agent, row))
    return declared


async def turn_reply(ledger: Ledger, turn_id: str) -> str | None:
    """The text of a turn's last assistant message, or ``None``."""
    for stored in reversed(await ledger.turns.messages(turn_id)):
        if stored.role == "assistant":
            text = "".join(getattr(block, "text", "") for block in stored.message.content)
            if text:
                return text
    return None


async def start_host(config: NexusConfig, host: BrokerHost) -> None:
    """Close the turns a killed process left open, register the agents ``nexus.toml`` declares, start the
    broker (reload and drain), then the monitors."""
    # turns a killed process left open are closed (aborted, with what they journaled) before the
    # broker starts: a session whose queue is empty now would otherwise never run again to close them
    await host.runtime.ledger.turns.recover()
    from nexus.broker.types import stored_agent
    from nexus.ledger import BrokerStore

    for agent, row in sync_configured_agents(config, BrokerStore(host.runtime.ledger.database)):
        identity, spec = stored_agent(row)  # the table applied to what the registry holds
        host.broker.register_agent(identity, spec=spec, queue=agent.queue, stored=True)
    await host.broker.start()
    if host.inbound is not None:
        host.inbound.start()


@contextlib.asynccontextmanager
async def running_broker(
    config: NexusConfig,
    ledger: Ledger,
    *,
    stream_fn: StreamFn | None = None,
    scope: set[str] | None = None,
) -> AsyncIterator[BrokerHost]:
    """A started broker host for the block (see :func:`build_host`); closed at its end, whatever happens.

    WAL checkpoints run on their own thread meanwhile, off the loop (``nexus.ledger._checkpoint``).
    """
    from nexus.ledger import background_checkpoints

    host = build_host(config, ledger, stream_fn=stream_fn, scope=scope)
    with background_checkpoints(ledger.database):
        try:
            await start_host(config, host)
            yield host
        finally:
            await host.close()
