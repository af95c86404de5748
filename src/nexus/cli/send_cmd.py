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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from nexus.cli._sigterm import run_terminable

if TYPE_CHECKING:
    from nexus.broker import AgentMessage
    from nexus.config import NexusConfig
    from nexus.ledger import DeliveryRecord, Ledger

POLL_S = 0.2


def send_command(args: argparse.Namespace) -> int:
    """Run ``nexus send``."""
    from nexus.broker import MAX_CONTENT_CHARS, AgentMessage, new_message_id, parse_mode
    from nexus.cli.run_cmd import read_message
    from nexus.errors import UsageError

    config = _config(args)
    if config.telemetry.tracing:  # the message's trace starts here (and its run's, when it runs here)
        from nexus.cli._telemetry import start_telemetry

        start_telemetry(config, args)
    route = getattr(args, "route", None)
    routed = f"--route {route}" if route in ("smart", "hybrid") else "AGENT"
    example = f"nexus send {args.agent or routed}"
    content = read_message(args.message, limit=MAX_CONTENT_CHARS, command=example)
    mode = None
    if args.mode is not None:
        try:
            mode = parse_mode(args.mode)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    session = _session_key(getattr(args, "session", None))
    if args.agent is None and route in (None, "explicit"):
        raise UsageError("give the agent: nexus send AGENT MESSAGE (or --route smart|hybrid to let past work decide)")
    message = AgentMessage(
        id=args.id or new_message_id(),
        from_=args.sender or "user",
        to=args.agent or "",
        content=content,
        session=session,
    )
    if args.wait:  # every message the conversation causes carries it: --wait waits for all of them (cli/_settle.py)
        message.conversation_id = message.id
    return run_terminable(_send_command(config, message, mode, args, route))


async def _send_command(
    config: NexusConfig, message: AgentMessage, mode: str | None, args: Any, route: str | None
) -> int:
    async def send(ledger: Ledger) -> int:
        routed = message
        if route is not None:
            from nexus.cli._routed_send import route_message

            routed = route_message(config, ledger, message, route)
        _check_names(config, ledger, routed)
        return await _send(config, ledger, routed, mode, args)

    return await hosting(config, "nexus send", send)


def _session_key(key: str | None) -> str | None:
    """``--session KEY`` checked like an inbound key (a bad one is a usage error, nothing stored)."""
    from nexus.broker import BrokerError, check_session_key
    from nexus.errors import UsageError

    if key is None:
        return None
    try:
        check_session_key(key)
    except BrokerError as exc:
        raise UsageError(f"--session: {exc}") from None
    return key


def drain_command(args: argparse.Namespace) -> int:
    """Run ``nexus queue drain``: every queue until all are empty."""
    from nexus.cli._telemetry import start_telemetry

    config = _config(args)
    start_telemetry(config, args, logs=True)
    return run_terminable(_drain_command(config))


async def _drain_command(config: NexusConfig) -> int:
    return await hosting(config, "nexus queue drain", lambda ledger: _drain_locked(config, ledger))


async def _drain_locked(config: NexusConfig, ledger: Ledger) -> int:
    """Drain every queue while holding the broker lock; then what others queued as it let go."""
    from nexus.broker import running_broker
    from nexus.cli._lock import exclusive_broker
    from nexus.cli._outcomes import RunLog, failures_line
    from nexus.ledger import BrokerStore

    runs = RunLog()
    with exclusive_broker(config):
        async with running_broker(config, ledger) as host:
            pending = sum(a.queue_depth for a in host.broker.list_agents())
            print(f"draining {pending} queued message{'s' if pending != 1 else ''}", file=sys.stderr)
            await host.wait_until_idle()
    await _run_leftovers(config, ledger)
    failures = await runs.failures(ledger, BrokerStore(ledger.database))
    if failures:  # a turn that failed is a failed run, though its message counts as handled (not run again);
        # so is a message failed without a run (crashes cut it max_attempts times)
        print(failures_line(failures, runs.handled()), file=sys.stderr)
        return 1
    return 0


async def _send(config: NexusConfig, ledger: Ledger, message: AgentMessage, mode: str | None, args: Any) -> int:
    from nexus.cli._deliver import parse_target
    from nexus.cli._lock import drain_lock

    target = parse_target(args.deliver, config) if getattr(args, "deliver", None) else None
    if target is not None:  # kept with the message, as over HTTP: whichever broker runs it delivers the reply
        message.deliver_reply(target)
    with drain_lock(config) as held:
        if held:
            code, gave_up = await _send_and_drain(config, ledger, message, mode, args)
    if held:  # after the lock is released: what others queued for us meanwhile (unless --timeout gave up)
        if not gave_up:
            await _run_leftovers(config, ledger)
        return code
    if target is not None and not _server_runs(config):
        from nexus.errors import ConfigError

        raise ConfigError(
            "--deliver needs the conversation to run in this process or in a running nexus serve, but a drain holds "
            "the broker lock; wait for it, or deliver from that process"
        )
    return await _send_to_running_broker(config, ledger, message, mode, args)


async def _send_and_drain(
    config: NexusConfig, ledger: Ledger, message: AgentMessage, mode: str | None, args: Any
) -> tuple[int, bool]:
    """Send ``message`` and drain its conversation in this process (the broker lock is ours); the exit code,
    and whether ``--wait --timeout`` gave up (its runs were aborted)."""
    from nexus.broker import running_broker
    from nexus.cli._deliver import LiveReply

    live = LiveReply(sys.stdout) if args.wait and not args.json else None  # the reply streams as it is written
    async with running_broker(config, ledger, scope={message.to}) as host:
        receipt = await host.broker.send(message, mode)
        _say_accepted(receipt.message_id, receipt.queue_item_id, receipt.duplicate, args)
        printing = asyncio.get_running_loop().create_task(live.follow(receipt.follow())) if live else None
        gave_up = await _drain_within(host, args.timeout if args.wait else None)
        if printing is not None and gave_up:  # its message may never have been taken: nothing to follow
            printing.cancel()
        elif printing is not None:
            await printing
    if live is not None:
        live.end()
    if gave_up:
        return _gave_up(args, gave_up), True
    return await _send_outcome(ledger, message, receipt, args, live), False


async def _drain_within(host: Any, seconds: float | None) -> str | None:
    """Drain until every agent is idle and its deliveries have ended (``None``); if ``seconds`` pass before the
    agents are idle, what became of the conversation.
    Then the runs still going are aborted (kept as ``aborted`` turns whose error says so): once this command
    exits nothing runs them, and a run that outlived its command would be cut anyway. Messages not taken yet
    stay queued."""
    try:
        await asyncio.wait_for(host.broker.wait_until_idle(), seconds)
    except TimeoutError:
        reason = f"nexus send gave up waiting after {seconds:g} s (--timeout)"
        agents = [agent.identity.agent_id for agent in host.broker.list_agents()]
        aborted = [agent_id for agent_id in agents if host.broker.abort(agent_id, reason=reason)]
        cut = "the run was aborted and kept as an aborted turn; " if aborted else ""
        return f"{cut}messages not run yet stay queued for the next nexus send or nexus queue drain"
    await host.wait_until_idle()  # the reply came in time; its delivery has the router's own bound (30 s)
    return None


def _gave_up(args: Any, what: str) -> int:
    print(f"nexus: error: no reply within {args.timeout} s ({what})", file=sys.stderr)
    return 1


async def _send_outcome(ledger: Ledger, message: AgentMessage, receipt: Any, args: Any, live: Any) -> int:
    """What ``nexus send`` says after running the conversation here: the reply, where it was delivered."""
    code = await _report(ledger, receipt.queue_item_id, args, reply_shown=live is not None and live.printed)
    if "deliver_to" not in message.metadata:
        return code
    if receipt.duplicate:
        print("nexus: already accepted earlier: its reply is not delivered again", file=sys.stderr)
        return code
    return _delivery_outcome(_delivery_of(ledger, receipt.queue_item_id), code)


def _delivery_of(ledger: Ledger, item_id: str) -> DeliveryRecord | None:
    """The ``deliveries`` row of the reply to queue item ``item_id`` (``None``: no run here delivered it)."""
    from nexus.ledger import BrokerStore, DeliveryLog

    item = BrokerStore(ledger.database).get_item(item_id)
    if item is None or item.turn_id is None:
        return None
    found = [r for r in DeliveryLog(ledger.database).for_turn(item.turn_id) if r.queue_item_id == item_id]
    return found[-1] if found else None


def _server_runs(config: NexusConfig) -> bool:
    from nexus.server import find_server

    return find_server(config) is not None


def _delivery_outcome(record: DeliveryRecord | None, code: int) -> int:
    """Say where the reply went; a failed delivery is exit 1 (the turn itself is in the ledger).

    The adapter's message ids and error are printed as escapes where they hold control characters: raw, an
    adapter (or the platform whose ids it relays) could recolour the terminal or overwrite this line."""
    from nexus.cli._input import printable

    if record is None:
        print("nexus: the message was not run in this process: nothing delivered", file=sys.stderr)
        return code or 1
    where = f"{record.adapter}/{record.account_id}:{record.target.get('to', '')}"
    if record.status == "delivered":
        ids = ", ".join(record.message_ids) or "none reported"
        print(printable(f"nexus: delivered to {where} ({record.path}); message ids: {ids}"), file=sys.stderr)
        return code
    how = "was cut short (part of the reply reached it)" if record.status == "partial" else "failed"
    line = f"nexus: error: delivery to {where} {how}: {record.error} (the reply is in the ledger)"
    print(printable(line), file=sys.stderr)
    return 1


async def _send_to_running_broker(
    config: NexusConfig, ledger: Ledger, message: AgentMessage, mode: str | None, args: Any
) -> int:
    """Another process holds the broker lock: hand the message to it.

    To a running ``nexus serve`` over HTTP; otherwise durably through the queue table (a drain
    picks it up). With ``--wait``, watch the item until a turn has consumed it; if the other
    broker goes away meanwhile (the lock comes free), run the conversation here instead.
    """
    from nexus.ledger import BrokerStore
    from nexus.server import find_server

    store = BrokerStore(ledger.database)
    server = find_server(config)
    if server is not None:
        body = {"content": message.content, "mode": mode, "id": message.id, "from": message.from_}
        if message.conversation_id is not None:
            body["conversation_id"] = message.conversation_id
        if message.session is not None:
            body["session"] = message.session
        if getattr(args, "deliver", None):
            body["deliver"] = args.deliver  # the server streams the reply to the adapter and records it
        sent = _post_message(server, message, body)
        item_id, duplicate = str(sent["queue_item_id"]), bool(sent["duplicate"])
        _say_accepted(message.id, item_id, duplicate, args)
        print(f"nexus: sent to the running nexus serve (pid {server.pid})", file=sys.stderr)
        if sent.get("pushed_out"):
            from nexus.cli._queue_hint import pushed_out_line

            print(pushed_out_line(message.to, [str(id_) for id_ in sent["pushed_out"]]), file=sys.stderr)
        if sent.get("deliver"):
            print(f"nexus: the server delivers the reply to {args.deliver} (see nexus sessions history)",
                  file=sys.stderr)  # fmt: skip
    else:
        item_id = _accept_for_other_process(config, store, message, mode, args)
    if not args.wait:
        if server is None:  # the holder may have let go since: then nobody else will run it
            await _run_leftovers(config, ledger)
        return await _report(ledger, item_id, args)
    return await _watch(config, ledger, store, message, item_id, args)


def _post_message(server: Any, message: AgentMessage, body: dict[str, Any]) -> Any:
    """POST the message to the running server; a server that did not answer may still have accepted it, so the
    error names the message's id, the one a retry must reuse (a known id is never queued twice)."""
    from nexus.server import NoAnswerError, call_server

    try:
        return call_server(server, "POST", f"/v1/agents/{message.to}/messages", body)
    except NoAnswerError as exc:
        raise NoAnswerError(
            f"{exc}; it may have accepted the message all the same: to send it again without a second copy, "
            f"repeat the command with --id {message.id}"
        ) from None


def _accept_for_other_process(
    config: NexusConfig, store: Any, message: AgentMessage, mode: str | None, args: Any
) -> str:
    """Queue ``message`` durably for the process that holds the broker lock; returns the item id."""
    from nexus.broker import parse_mode, session_label_for
    from nexus.cli._queue_hint import over_cap_hint
    from nexus.errors import ConfigError, UsageError
    from nexus.ledger import AcceptRequest

    agent = store.get_agent(message.to)
    if agent is None:  # _check_names registered it; only a concurrent `nexus agents rm` gets here
        raise ConfigError(f"agent {message.to!r} was removed meanwhile")
    message.timestamp = message.timestamp or int(time.time() * 1000)
    sender_is_agent = store.get_agent(message.from_) is not None
    label = session_label_for(message.to, agent.session_label, message.session)
    request = AcceptRequest(
        message.to, label, message.id, message.from_, message.to_json(),
        parse_mode(mode) if mode else config.broker.mode, sender_is_agent,
        session_key=message.session if label != agent.session_label else None,
    )  # fmt: skip
    try:
        row, created = store.accept_many([request])[0]
    except ValueError as exc:  # the per-sender session's label is taken by another session
        raise UsageError(f"--session: the message was not queued: {exc}") from None
    _say_accepted(message.id, row.id, not created, args)
    hint = over_cap_hint(config, store.pending(message.to), message.to, label) if created else None
    if hint is not None:
        print(hint, file=sys.stderr)
    if not args.wait:
        print("nexus: another process holds the broker lock: the message runs when that broker reaches it "
              "(a server or `nexus queue drain` runs every queue)", file=sys.stderr)  # fmt: skip
    return str(row.id)


async def _run_leftovers(config: NexusConfig, ledger: Ledger) -> None:
    """Run the messages that wait with nobody left to drain them, if the broker lock is free.

    A ``nexus send`` that finds the lock held only queues its message for the holder; but the
    holder may be another ``nexus send``, which drains only its own conversation and exits. So
    whoever lets go of the lock, and whoever queued for a holder, looks once more: each message
    is committed before its sender tries the lock, and the holder looks after releasing it, so
    at least one of them sees the message with the lock free. Bounded: a round that changes
    nothing (a message no run can take) ends it.
    """
    from nexus.broker import running_broker
    from nexus.cli._lock import drain_lock
    from nexus.ledger import BrokerStore

    store = BrokerStore(ledger.database)
    seen: frozenset[str] = frozenset()
    while True:
        pending = store.pending()
        ids = frozenset(item.id for item in pending)
        if not ids or ids == seen:
            return
        seen = ids
        with drain_lock(config) as held:
            if not held:  # another broker drains now; it looks again when it lets go
                return
            async with running_broker(config, ledger, scope={str(item.agent_id) for item in pending}) as host:
                await host.wait_until_idle()


async def _watch(
    config: NexusConfig, ledger: Ledger, store: Any, message: AgentMessage, item_id: str, args: Any
) -> int:
    """Wait for a turn to consume the item; take over the conversation if the other broker goes away."""
    from nexus.broker import running_broker
    from nexus.cli._lock import drain_lock
    from nexus.cli._settle import Unsettled

    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    waiting = Unsettled(store, item_id, message.conversation_id)
    while waiting.now():
        with drain_lock(config) as held:
            if held:  # the other broker is gone: run the conversation in this process
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                async with running_broker(config, ledger, scope={message.to}) as host:
                    if gave_up := await _drain_within(host, left):
                        return _gave_up(args, gave_up)
                continue
        if deadline is not None and time.monotonic() > deadline:
            print(f"nexus: error: no reply within {args.timeout} s ({waiting.what()})", file=sys.stderr)
            return 1
        await asyncio.sleep(POLL_S)
    return await _report(ledger, item_id, args)


def _say_accepted(message_id: str, item_id: str, duplicate: bool, args: Any) -> None:
    if args.json:
        return
    note = " (already accepted earlier: not queued again)" if duplicate else ""
    print(f"accepted {message_id} (queue item {item_id}){note}", file=sys.stderr if args.wait else sys.stdout)


async def _report(ledger: Ledger, item_id: str, args: Any, *, reply_shown: bool = False) -> int:
    """Print the outcome (the reply with ``--wait`` unless it streamed, JSON with ``--json``); exit 1 on failure."""
    from nexus.broker import turn_reply
    from nexus.cli._settle import later_answers
    from nexus.ledger import BrokerStore
    from nexus.server import item_turns, turn_error_text

    item = BrokerStore(ledger.database).get_item(item_id)
    status = item.status if item is not None else "missing"
    reply = await turn_reply(ledger, item.turn_id) if item is not None and item.turn_id else None
    turn = (await item_turns(ledger, [item])).get(item.turn_id or "") if item is not None else None
    turn_failed = status == "delivered" and turn is not None and turn.status in ("failed", "aborted")
    later = await later_answers(ledger, BrokerStore(ledger.database), item) if item is not None and args.wait else []
    if args.json:
        print(json.dumps({
            "message_id": item.message_id if item else None, "queue_item_id": item_id, "status": status,
            "turn_id": later[-1][0] if later else item.turn_id if item else None,
            "reply": later[-1][1] if later else reply, "error": item.error if item else None,
            "turn_status": turn.status if turn else None, "turn_error": turn_error_text(turn),
            "replies": [{"turn_id": t, "reply": r} for t, r in ([(item.turn_id, reply)] if item and reply else [])
                        + later],
        }))  # fmt: skip
    else:
        if args.wait and reply and not reply_shown:
            print(reply)
        for _, answer in later:  # the conversation went on (a worker's reply came back): its answers, in order
            print(f"nexus: {item.agent_id if item else 'the agent'} answered again as the conversation went on:",
                  file=sys.stderr)  # fmt: skip
            print(answer)
        if status not in ("delivered", "queued", "processing"):  # with or without --wait: say why
            outcome = "failed" if status == "failed" else f"was {status}"
            print(f"nexus: error: the message {outcome}: {item.error if item else ''}", file=sys.stderr)
        elif turn_failed and turn is not None:  # consumed (never run again), but its turn failed or was cut: say why
            how = "was interrupted" if turn.status == "aborted" else "failed"
            print(f"nexus: error: the message's turn {how}: {turn_error_text(turn) or 'no reason recorded'}",
                  file=sys.stderr)  # fmt: skip
    return 1 if status in ("failed", "dropped") or turn_failed else 0


def _config(args: argparse.Namespace) -> NexusConfig:
    from nexus.cli._state import checked_config, prepare_state

    config = checked_config(args.config)  # a bad [agents] table creates nothing (it left an empty agents.db)
    prepare_state(config)
    return config


async def hosting(config: NexusConfig, command: str, body: Callable[[Ledger], Awaitable[int]]) -> int:
    """``body`` on the config's ledger (:func:`open_recovered`); once that is closed, a stop that a silent PostgreSQL
    cut short is said (:func:`~nexus.cli._outcomes.told_abandoned`), stopped by SIGTERM too (it then exits 143),
    and is an error: ``nexus send`` and ``nexus queue drain``."""
    from nexus.cli._outcomes import told_abandoned

    ledger: Ledger | None = None
    try:
        async with open_recovered(config) as ledger:
            code = await body(ledger)
    finally:
        cut_short = ledger is not None and told_abandoned(command, ledger)
    return code or int(cut_short)


@asynccontextmanager
async def open_recovered(config: NexusConfig) -> AsyncIterator[Ledger]:
    """The config's ledger for a command that hosts the broker (send, drain, serve), crashed turns closed."""
    from nexus.cli._ledger import open_ledger, recover_open_turns
    from nexus.cli._state import make_workspace

    async with open_ledger(config) as ledger:
        make_workspace(config)  # once the ledger is reached: a server out of reach leaves nothing behind
        # like every entry point: close the turns of killed processes (a SIGKILLed drain's turn in a
        # session whose queue is now empty was otherwise left open for ever)
        await recover_open_turns(ledger)
        yield ledger


def _check_names(config: NexusConfig, ledger: Ledger, message: AgentMessage) -> None:
    """An unknown target or sender (neither registered nor in nexus.toml) is a usage error."""
    from nexus.broker import sync_configured_agents
    from nexus.errors import UsageError
    from nexus.ledger import BrokerStore

    store = BrokerStore(ledger.database)
    sync_configured_agents(config, store)
    known = {row.agent_id for row in store.list_agents()}
    if message.to not in known:
        names = ", ".join(sorted(known)) or "none registered: add one with nexus agents add ID"
        raise UsageError(f"unknown agent {message.to!r} (known: {names})")
    if message.from_ not in ("user", "system") and message.from_ not in known:
        raise UsageError(f"--from {message.from_!r} is not a registered agent (or 'user'/'system')")
    if message.from_ == message.to:
        raise UsageError(f"agent {message.to!r} cannot send a message to itself")
