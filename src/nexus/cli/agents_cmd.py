"""``nexus agents …`` and ``nexus queue …``: the broker's registry and queues, embedded (no server).

These commands read and change the durable rows directly; a running broker picks the
registry up on its next start — except under a running ``nexus serve`` for the same ledger,
where ``agents add`` and ``queue clear`` go through its API so its broker sees them at once.
Bad input (an id that is not a name, an unknown tool, a model
that is not ``provider/model``) is a config error: exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.ledger import AgentRow, BrokerStore, Ledger, QueueItem
    from nexus.server import RunningServer


def agents_command(args: argparse.Namespace) -> int:
    """Run one ``nexus agents`` action."""
    from nexus.cli._state import checked_config

    return asyncio.run(_agents(checked_config(args.config), args))


async def _agents(config: NexusConfig, args: argparse.Namespace) -> int:
    from nexus.cli._ledger import ledger_exists

    if args.action == "rm" and args.agent_id in config.agents:
        _refuse_defined_in_file(config, args.agent_id)
    if args.action == "add":
        spec = _spec_from_args(args, config.mcp.servers)
        if "model" in spec:
            _check_model(config, spec["model"])
    elif not ledger_exists(config) and not config.agents:
        return _empty(args)
    if args.action == "add" and (server := _running_server(config)) is not None:
        from nexus.server import call_server

        given = {"role": args.role, "session_label": args.session}
        body = {"id": args.agent_id, **{key: value for key, value in given.items() if value is not None}, **spec}
        made = call_server(server, "POST", "/v1/agents", body)
        print(f"agent {made['id']} ({made['role']}) talks in session {made['session_label']} (via nexus serve)")
        return 0
    async with _open_store(config, reading=args.action in ("list", "show")) as (_, store):
        from nexus.broker import sync_configured_agents

        sync_configured_agents(config, store)
        if args.action == "add":
            from nexus.ledger import AgentSessionTakenError

            try:
                row = store.add_agent(args.agent_id, role=args.role, session_label=args.session, spec=spec)
            except AgentSessionTakenError as exc:
                print(f"nexus: error: --session: {exc}", file=sys.stderr)
                return 2
            print(f"agent {row.agent_id} ({row.role}) talks in session {row.session_label}")
            return 0
        if args.action == "list":
            return _list(store, args.json)
        row_or_none = store.get_agent(args.agent_id)
        if row_or_none is None:
            return _unknown(store, args.agent_id)
        if args.action == "show":
            return _show(row_or_none, store.items(agent_id=args.agent_id, statuses=_OPEN), args.json)
        from nexus.ledger import AgentHasWaitingMessagesError

        try:
            store.remove_agent(args.agent_id)
        except AgentHasWaitingMessagesError as exc:
            print(f"nexus: error: {exc}", file=sys.stderr)
            return 2
        print(f"removed agent {args.agent_id} (its session {row_or_none.session_label} stays in the ledger)")
        return 0


def _refuse_defined_in_file(config: NexusConfig, agent_id: str) -> None:
    """Refuse to remove an agent a ``[agents.<id>]`` table defines (exit 2): the next command that opens the
    registry would apply the table again and bring the agent back (messages to it accepted again)."""
    from nexus.errors import UsageError

    raise UsageError(
        f"agent {agent_id} is defined in {config.where('agents', agent_id)} ([agents.{agent_id}]); "
        "delete that table first, or the next command brings the agent back, then run `nexus agents rm` again"
    )


def queue_command(args: argparse.Namespace) -> int:
    """Run one ``nexus queue`` action."""
    from nexus.cli._state import checked_config

    return asyncio.run(_queue(checked_config(args.config), args))


async def _queue(config: NexusConfig, args: argparse.Namespace) -> int:
    from nexus.cli._ledger import ledger_exists

    if not ledger_exists(config) and not config.agents:
        return _empty(args)
    async with _open_store(config, reading=args.action == "list") as (ledger, store):
        from nexus.broker import sync_configured_agents

        sync_configured_agents(config, store)
        if getattr(args, "agent_id", None) is not None and store.get_agent(args.agent_id) is None:
            return _unknown(store, args.agent_id)
        if args.action == "clear" and (server := _running_server(config)) is not None:
            from nexus.server import call_server

            dropped = int(call_server(server, "DELETE", f"/v1/agents/{args.agent_id}/queue")["dropped"])
            print(
                f"dropped {dropped} waiting message{'' if dropped == 1 else 's'} of {args.agent_id} (via nexus serve)"
            )
            return 0
        if args.action == "clear":
            waiting = [item.id for item in store.items(agent_id=args.agent_id, statuses=("queued",))]
            store.drop(waiting, "cleared by `nexus queue clear`")
            noun = "message" if len(waiting) == 1 else "messages"
            print(f"dropped {len(waiting)} waiting {noun} of {args.agent_id}")
            return 0
        statuses = () if args.all else (*_OPEN, "failed")
        items = store.items(agent_id=args.agent_id, statuses=statuses)
        code = await _print_items(ledger, items, args.json)
        _say_if_orphaned(config, sum(1 for item in items if item.status == "processing"))
        return code


_OPEN = ("queued", "processing")


def _say_if_orphaned(config: NexusConfig, processing: int) -> None:
    """``processing`` rows with no drain running: their process was killed (a stranger's trial found them shown as
    busy with no hint). On SQLite every drain of this home holds the broker lock; on PostgreSQL another machine's
    broker may be running them, so nothing is said there."""
    from nexus.broker import broker_lock_held

    if processing and config.database_url is None and not broker_lock_held(config):
        noun = "message shows" if processing == 1 else "messages show"
        print(f"nexus: {processing} {noun} processing but no nexus serve or drain runs for this NEXUS_HOME (its "
              "process was stopped): `nexus queue drain` runs them again", file=sys.stderr)  # fmt: skip


def _running_server(config: NexusConfig) -> RunningServer | None:
    """A ``nexus serve`` for this ledger: changes go through it so its live broker sees them."""
    from nexus.server import find_server

    return find_server(config)


def _check_model(config: NexusConfig, ref: str) -> None:
    """A model no run could reach is refused now (the check ``POST /v1/agents`` and ``[agents]`` share)."""
    from nexus.engine import unreachable_model_problem
    from nexus.errors import UsageError

    problem = unreachable_model_problem(config, ref)
    if problem is not None:
        raise UsageError(f"--model: {problem}")


def _spec_from_args(args: argparse.Namespace, mcp_servers: Iterable[str] = ()) -> dict[str, Any]:
    from nexus.config import BUILTIN_TOOL_NAMES, check_agent_ids, unknown_tool_entries
    from nexus.errors import UsageError

    try:
        check_agent_ids({args.agent_id: None})  # type: ignore[dict-item]  # only the ids are read
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    spec: dict[str, Any] = {}
    if args.model:
        provider, _, model_id = args.model.partition("/")
        if not provider or not model_id:
            raise UsageError(f"--model {args.model!r} must be PROVIDER/MODEL, e.g. openai/gpt-4o-mini")
        spec["model"] = args.model
    if args.tools is not None:
        tools = [name.strip() for name in args.tools.split(",") if name.strip()]
        problems = unknown_tool_entries(tools, BUILTIN_TOOL_NAMES, mcp_servers)
        if problems:
            raise UsageError(f"--tools: {'; '.join(problems)}")
        spec["tools"] = tools
    if args.session is not None and not args.session.strip():
        raise UsageError("--session is empty: give a session label")
    if args.session is not None:
        from nexus.ledger import label_problem

        problem = label_problem(args.session)
        if problem is not None:
            raise UsageError(f"--session: {problem}")
    return spec


@asynccontextmanager
async def _open_store(config: NexusConfig, *, reading: bool) -> AsyncIterator[tuple[Ledger, BrokerStore]]:
    from nexus.cli._ledger import open_ledger
    from nexus.ledger import BrokerStore

    async with open_ledger(config, reading=reading) as ledger:
        yield ledger, BrokerStore(ledger.database)


def _empty(args: argparse.Namespace) -> int:
    """No database yet: listings are empty, anything naming an agent names an unknown one."""
    if args.action != "list" or getattr(args, "agent_id", None) is not None:
        return _unknown(None, args.agent_id)
    if args.json:
        print("[]")
    else:
        print("no agents yet (add one: nexus agents add ID)" if "agents" in args.handler else "no queued messages")
    return 0


def _unknown(store: BrokerStore | None, agent_id: str) -> int:
    known = ", ".join(row.agent_id for row in store.list_agents()) if store is not None else ""
    print(f"nexus: error: unknown agent {agent_id!r} (known: {known or 'none registered'})", file=sys.stderr)
    return 2


def _agent_json(row: AgentRow, depth: int) -> dict[str, Any]:
    return {
        "id": row.agent_id,
        "role": row.role,
        "session": row.session_label,
        "spec": row.spec,
        "queue_depth": depth,
        "created_at": row.created_at,
    }


def _list(store: BrokerStore, as_json: bool) -> int:
    rows = store.list_agents()
    depths: dict[str, int] = {}
    for item in store.items(statuses=_OPEN):
        depths[item.agent_id or ""] = depths.get(item.agent_id or "", 0) + 1
    if as_json:
        print(json.dumps([_agent_json(row, depths.get(row.agent_id, 0)) for row in rows], indent=2))
        return 0
    if not rows:
        print("no agents yet (add one: nexus agents add ID)")
        return 0
    from nexus.cli._input import printable

    print(f"{'ID':<20} {'ROLE':<8} {'QUEUE':>5}  {'MODEL':<28} SESSION")
    for row in rows:  # names a config or an older version stored may hold control characters: escaped
        model, session = printable(str(row.spec.get("model", "(default)"))), printable(row.session_label)
        print(f"{printable(row.agent_id):<20} {row.role:<8} {depths.get(row.agent_id, 0):>5}  {model:<28} {session}")
    return 0


def _show(row: AgentRow, items: list[QueueItem], as_json: bool) -> int:
    if as_json:
        print(json.dumps(_agent_json(row, len(items)), indent=2))
        return 0
    from nexus.cli._input import printable

    print(f"agent    {printable(row.agent_id)}\nrole     {row.role}\nsession  {printable(row.session_label)}")
    print(f"model    {printable(str(row.spec.get('model', '(default)')))}")
    tools = row.spec.get("tools")  # absent: the config's policy; [] (`--tools ""`): no tool at all
    print(f"tools    {'(the config policy)' if tools is None else printable(', '.join(map(str, tools))) or '(none)'}")
    print(f"queue    {len(items)} waiting or running")
    return 0


def _when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


async def _print_items(ledger: Ledger, items: list[QueueItem], as_json: bool) -> int:
    """The items as a table (or JSON); ``TURN`` is how the turn that consumed each one ended (``-``: none yet)."""
    from nexus.server import queue_item_views

    views = await queue_item_views(ledger, items)
    if as_json:
        print(json.dumps(views, indent=2))
        return 0
    if not items:
        print("no queued messages")
        return 0
    print(
        f"{'ITEM':<26} {'AGENT':<16} {'SESSION':<24} {'MODE':<13} {'STATUS':<10} {'TURN':<9} {'TRIES':>5}  "
        f"{'QUEUED (UTC)':<19}  TEXT"
    )
    from nexus.cli._input import printable

    for item, view in zip(items, views, strict=True):
        text = printable(item.content.replace("\n", " ")[:200])
        text = text if len(text) <= 50 else text[:49] + "…"
        print(
            f"{item.id:<26} {printable(item.agent_id or '-'):<16} {printable(item.session_label):<24} {item.mode:<13} "
            f"{item.status:<10} "
            f"{view['turn_status'] or '-':<9} {item.attempts:>5}  {_when(item.enqueued_at):<19}  {text}"
        )
        if item.error:
            print(f"{'':<26} reason: {printable(item.error)}")
        elif view["turn_status"] == "failed":
            print(f"{'':<26} reason: its turn failed: {printable(str(view['turn_error'] or 'no reason recorded'))}")
    return 0
