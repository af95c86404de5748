"""Arguments of the broker commands: ``nexus agents …`` and ``nexus queue …``."""

from __future__ import annotations

import argparse

_HANDLER = "nexus.cli.agents_cmd:agents_command"
_QUEUE_HANDLER = "nexus.cli.agents_cmd:queue_command"


def add_agents(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``nexus agents add|list|show|rm``: the broker's registry of named agents."""
    sub = commands.add_parser(
        "agents",
        help="register, list, show and remove named agents (managers and workers)",
        description=(
            "Named agents receive messages through durable queues (see docs/broker.md). Each agent\n"
            "talks in its own session (agent:ID unless --session says otherwise); the registry is\n"
            "kept in the ledger, so agents survive restarts."
        ),
        epilog=(
            "examples:\n  nexus agents add coder --role worker --model openai/gpt-4o-mini --tools read,edit,bash\n"
            "  nexus agents add lead --role manager\n  nexus agents list --json\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True

    add = actions.add_parser("add", help="register an agent (or update one with the same id)")
    add.add_argument("agent_id", metavar="ID", help="letters, digits, '.', '_' or '-' (at most 64)")
    add.add_argument("--role", choices=("manager", "worker"), default="worker", help="default: worker")
    add.add_argument("--model", metavar="PROVIDER/MODEL", help="the agent's model (default: the run default)")
    add.add_argument("--session", metavar="LABEL", help="the agent's session (default: agent:ID)")
    add.add_argument(
        "--tools", metavar="NAMES", help="comma-separated tools the agent may use (default: the config's policy)"
    )
    add.set_defaults(handler=_HANDLER)

    listing = actions.add_parser("list", help="every agent with its role, session, state and queue depth")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_HANDLER)

    show = actions.add_parser("show", help="one agent: identity, spec, queue")
    show.add_argument("agent_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(handler=_HANDLER)

    remove = actions.add_parser("rm", help="remove an agent (its session and history stay in the ledger)")
    remove.add_argument("agent_id", metavar="ID")
    remove.set_defaults(handler=_HANDLER)


def add_queue(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``nexus queue list|clear``: the agents' durable queues."""
    sub = commands.add_parser(
        "queue",
        help="inspect and clear the agents' durable message queues",
        description=(
            "Every message sent to an agent is a durable queue item until a turn consumes it.\n"
            "`list` shows what waits, what runs and what failed (with the reason)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True

    listing = actions.add_parser("list", help="queued, running and failed items (of one agent, or all)")
    listing.add_argument("agent_id", metavar="AGENT", nargs="?", help="only this agent's queue")
    listing.add_argument("--all", action="store_true", help="also delivered and dropped items")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_QUEUE_HANDLER)

    clear = actions.add_parser("clear", help="drop every waiting message of an agent (recorded as dropped)")
    clear.add_argument("agent_id", metavar="AGENT")
    clear.set_defaults(handler=_QUEUE_HANDLER)
