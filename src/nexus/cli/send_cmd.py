"""``nexus send`` and ``nexus queue drain``: the broker embedded in the command (no server needed).

``send`` accepts the message durably and prints its id. Then, if no other process drains
this ``$NEXUS_HOME`` (the broker lock is free), it drains in-process: the target agent and
every agent the conversation reaches, until all of them are idle. If another process holds
the lock, the message waits for it; ``--wait`` then polls the queue item until a turn has
consumed it. ``queue drain`` runs every queue until all are empty — also how a crashed drain
resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus.broker import AgentMessage
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger

POLL_S = 0.2


def send_command(args: argparse.Namespace) -> int:
    """Run ``nexus send``."""
    from nexus.broker import AgentMessage, new_message_id, parse_mode
    from nexus.broker.types import MAX_CONTENT_CHARS
    from nexus.cli.run_cmd import read_message
    from nexus.errors import ConfigError

    config = _config(args)
    content = read_message(args.message)
    if len(content) > MAX_CONTENT_CHARS:
        raise ConfigError(f"the message is {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,}")
    mode = None
    if args.mode is not None:
        try:
            mode = parse_mode(args.mode)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    message = AgentMessage(id=args.id or new_message_id(), from_=args.sender or "user", to=args.agent, content=content)
    with _open_ledger(config) as ledger:
        _check_names(config, ledger, message)
        return asyncio.run(_send(config, ledger, message, mode, args))


def drain_command(args: argparse.Namespace) -> int:
    """Run ``nexus queue drain``: every queue until all are empty."""
    from nexus.broker.host import broker_lock, build_broker, start_broker

    config = _config(args)
    with _open_ledger(config) as ledger, broker_lock(config) as held:
        if not held:
            print("nexus: error: another process is draining these queues (broker.lock is held)", file=sys.stderr)
            return 1

        async def drain() -> int:
            broker = build_broker(config, ledger)
            await start_broker(config, broker)
            pending = sum(a.queue_depth for a in broker.list_agents())
            print(f"draining {pending} queued message{'s' if pending != 1 else ''}", file=sys.stderr)
            await broker.wait_until_idle()
            await broker.close()
            return 0

        return asyncio.run(drain())


async def _send(config: NexusConfig, ledger: Ledger, message: AgentMessage, mode: str | None, args: Any) -> int:
    from nexus.broker.host import broker_lock, build_broker, start_broker

    with broker_lock(config) as held:
        if held:
            broker = build_broker(config, ledger, scope={message.to})
            await start_broker(config, broker)
            receipt = await broker.send(message, mode)
            _say_accepted(receipt.message_id, receipt.queue_item_id, receipt.duplicate, args)
            await broker.wait_until_idle()
            await broker.close()
            return _report(ledger, receipt.queue_item_id, args)
    return await _send_to_running_broker(config, ledger, message, mode, args)


async def _send_to_running_broker(
    config: NexusConfig, ledger: Ledger, message: AgentMessage, mode: str | None, args: Any
) -> int:
    """Another process holds the broker lock: queue the message durably for it.

    With ``--wait``, watch the item until a turn has consumed it; if the other broker goes away
    meanwhile (the lock comes free), run the conversation here instead.
    """
    from nexus.broker import parse_mode
    from nexus.broker.host import broker_lock, build_broker, start_broker
    from nexus.errors import ConfigError
    from nexus.ledger.broker_store import AcceptRequest, BrokerStore

    store = BrokerStore(ledger.database)
    agent = store.get_agent(message.to)
    if agent is None:  # declared in nexus.toml only: the running broker registers it when it starts
        raise ConfigError(f"agent {message.to!r} is not registered yet; start the broker once or nexus agents add it")
    message.timestamp = message.timestamp or int(time.time() * 1000)
    sender_is_agent = store.get_agent(message.from_) is not None
    request = AcceptRequest(
        message.to, agent.session_label, message.id, message.from_, message.to_json(),
        parse_mode(mode) if mode else config.broker.mode, sender_is_agent,
    )  # fmt: skip
    row, created = store.accept_many([request])[0]
    _say_accepted(message.id, row.id, not created, args)
    if not args.wait:
        print("nexus: another process holds the broker lock: the message runs when that broker reaches it "
              "(a server or `nexus queue drain` runs every queue)", file=sys.stderr)  # fmt: skip
        return _report(ledger, row.id, args)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    while (item := store.get_item(row.id)) is not None and item.status in ("queued", "processing"):
        with broker_lock(config) as held:
            if held:  # the other broker is gone: run the conversation in this process
                broker = build_broker(config, ledger, scope={message.to})
                await start_broker(config, broker)
                await broker.wait_until_idle()
                await broker.close()
                continue
        if deadline is not None and time.monotonic() > deadline:
            print(f"nexus: error: no reply within {args.timeout} s (the message stays queued)", file=sys.stderr)
            return 1
        await asyncio.sleep(POLL_S)
    return _report(ledger, row.id, args)


def _say_accepted(message_id: str, item_id: str, duplicate: bool, args: Any) -> None:
    if args.json:
        return
    note = " (already accepted earlier: not queued again)" if duplicate else ""
    print(f"accepted {message_id} (queue item {item_id}){note}", file=sys.stderr if args.wait else sys.stdout)


def _report(ledger: Ledger, item_id: str, args: Any) -> int:
    """Print the outcome (the reply with ``--wait``, JSON with ``--json``); exit 1 if the message failed."""
    from nexus.ledger.broker_store import BrokerStore

    item = BrokerStore(ledger.database).get_item(item_id)
    status = item.status if item is not None else "missing"
    reply = _reply_text(ledger, item.turn_id) if item is not None and item.turn_id else None
    if args.json:
        print(json.dumps({
            "message_id": item.message_id if item else None, "queue_item_id": item_id, "status": status,
            "turn_id": item.turn_id if item else None, "reply": reply, "error": item.error if item else None,
        }))  # fmt: skip
    elif args.wait:
        if reply:
            print(reply)
        if status not in ("delivered", "queued", "processing"):
            print(f"nexus: error: the message was {status}: {item.error if item else ''}", file=sys.stderr)
    return 1 if status in ("failed", "dropped") else 0


def _reply_text(ledger: Ledger, turn_id: str) -> str | None:
    for stored in reversed(ledger.messages(turn_id)):
        if stored.role == "assistant":
            text = "".join(getattr(block, "text", "") for block in stored.message.content)
            if text:
                return text
    return None


def _config(args: argparse.Namespace) -> NexusConfig:
    from nexus.cli._state import prepare_state
    from nexus.config import load_config

    config = load_config(args.config)
    prepare_state(config)
    return config


@contextmanager
def _open_ledger(config: NexusConfig) -> Iterator[Ledger]:
    from nexus.cli.run_cmd import BusyNotice
    from nexus.ledger import Ledger

    with Ledger.open(config.database_path) as ledger:
        ledger.database.on_busy = BusyNotice()
        # like every entry point: close the turns of killed processes (a SIGKILLed drain's turn in a
        # session whose queue is now empty was otherwise left open for ever)
        recovered = ledger.recover()
        if recovered:
            from nexus.cli._errors import recovered_notice

            print(recovered_notice(ledger, recovered), file=sys.stderr)
        yield ledger


def _check_names(config: NexusConfig, ledger: Ledger, message: AgentMessage) -> None:
    """An unknown target or sender (neither registered nor in nexus.toml) is a usage error."""
    from nexus.errors import ConfigError
    from nexus.ledger.broker_store import BrokerStore

    store = BrokerStore(ledger.database)
    known = {row.agent_id for row in store.list_agents()} | set(config.agents)
    if message.to not in known:
        names = ", ".join(sorted(known)) or "none registered: add one with nexus agents add ID"
        raise ConfigError(f"unknown agent {message.to!r} (known: {names})")
    if message.from_ not in ("user", "system") and message.from_ not in known:
        raise ConfigError(f"--from {message.from_!r} is not a registered agent (or 'user'/'system')")
    if message.from_ == message.to:
        raise ConfigError(f"agent {message.to!r} cannot send a message to itself")
