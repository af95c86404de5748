"""Arguments of the broker commands: ``nexus agents …`` and ``nexus queue …``."""

from __future__ import annotations

import argparse

from nexus.cli._input import message_id, nonempty_name, seconds, utf8_name
from nexus.cli._telemetry import add_log_options

_HANDLER = "nexus.cli.agents_cmd:agents_command"


class PositionalsAnywhere(argparse.ArgumentParser):
    """A subcommand's parser that takes its positionals wherever they stand among its options.

    argparse fills positionals from the run of arguments before the first option, so with an optional
    first one (``send [AGENT] MESSAGE``) ``nexus send ghost --route smart "x"`` took ``ghost`` for the
    message and refused ``x`` as an unrecognized argument. Intermixed parsing reads the options first;
    after ``--`` (everything after it is a positional) argparse's own parsing is kept, as intermixed
    parsing mishandles it.
    """

    _intermixed = False

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads; this keeps argparse's behaviour
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixed or (args is not None and "--" in args):  # the intermixed parse calls this twice
            return super().parse_known_args(args, namespace)
        self._intermixed = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixed = False


_QUEUE_HANDLER = "nexus.cli.agents_cmd:queue_command"


def add_agents(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus agents add|list|show|rm``: the broker's registry of named agents."""
    sub = commands.add_parser(
        "agents",
        help=summary,
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
    add.add_argument("agent_id", metavar="ID", type=utf8_name, help="letters, digits, '.', '_' or '-' (at most 64)")
    add.add_argument(
        "--role", choices=("manager", "worker"), help="default: worker (re-adding an agent keeps what is not given)"
    )
    add.add_argument(
        "--model", metavar="PROVIDER/MODEL", type=nonempty_name, help="the agent's model (default: the run default)"
    )
    add.add_argument("--session", metavar="LABEL", type=utf8_name, help="the agent's session (default: agent:ID)")
    add.add_argument(
        "--tools",
        metavar="NAMES",
        type=utf8_name,
        help="comma-separated tools the agent may use (default: the config's policy)",
    )
    add.set_defaults(handler=_HANDLER)

    listing = actions.add_parser("list", help="every agent with its role, session, state and queue depth")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_HANDLER)

    show = actions.add_parser("show", help="one agent: identity, spec, queue")
    show.add_argument("agent_id", metavar="ID", type=utf8_name)
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(handler=_HANDLER)

    remove = actions.add_parser("rm", help="remove an agent (its session and history stay in the ledger)")
    remove.add_argument("agent_id", metavar="ID", type=utf8_name)
    remove.set_defaults(handler=_HANDLER)


def add_queue(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus queue list|clear``: the agents' durable queues."""
    sub = commands.add_parser(
        "queue",
        help=summary,
        description=(
            "Every message sent to an agent is a durable queue item until a turn consumes it.\n"
            "`list` shows what waits, what runs and what failed (with the reason)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True

    listing = actions.add_parser("list", help="queued, running and failed items (of one agent, or all)")
    listing.add_argument("agent_id", metavar="AGENT", nargs="?", type=utf8_name, help="only this agent's queue")
    listing.add_argument("--all", action="store_true", help="also delivered and dropped items")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_QUEUE_HANDLER)

    clear = actions.add_parser("clear", help="drop every waiting message of an agent (recorded as dropped)")
    clear.add_argument("agent_id", metavar="AGENT", type=utf8_name)
    clear.set_defaults(handler=_QUEUE_HANDLER)

    drain = actions.add_parser("drain", help="run every agent's queue until all are empty (resumes a crashed drain)")
    add_log_options(drain)
    drain.set_defaults(handler="nexus.cli.send_cmd:drain_command")


def add_send(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus send AGENT MESSAGE``: a durable message to a named agent."""
    sub = commands.add_parser(
        "send",
        help=summary,
        description=(
            "Accept MESSAGE durably for AGENT and print its id. Unless another process drains\n"
            "these queues, the agent (and any agent it messages) runs in this process until idle.\n"
            "Use - to read the message from stdin."
        ),
        epilog=(
            'examples:\n  nexus send coder "fix the failing test" --wait\n  nexus send lead "status?" --mode collect\n'
            '  nexus send --route smart "carry on with the flaky checkout test" --wait\n'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.__class__ = PositionalsAnywhere  # made by the subcommands' own factory: only its parsing changes
    sub.add_argument(
        "agent", metavar="AGENT", nargs="?", type=utf8_name, help="the agent's id (with --route: may be left out)"
    )
    sub.add_argument("message", metavar="MESSAGE", help="the message, or - to read it from stdin")
    sub.add_argument(
        "--route",
        choices=("explicit", "smart", "hybrid"),
        help="smart: continue the past work the message fits (a fork of it) or start a new conversation; "
        "hybrid: the fork when confident, else AGENT as given (docs/routing.md)",
    )
    sub.add_argument(
        "--mode", metavar="MODE", help="queue mode: steer, followup, collect, steer-backlog, queue, interrupt"
    )
    sub.add_argument("--from", dest="sender", metavar="ID", type=utf8_name, help="the sending agent (default: user)")
    sub.add_argument(
        "--id",
        metavar="MSG_ID",
        type=message_id,
        help="message id (default: a new one); the same id is never queued twice",
    )
    sub.add_argument(
        "--session",
        metavar="KEY",
        type=utf8_name,
        help="a session key (e.g. dm:telegram:42): the agent's per-sender session of that key (default: its own)",
    )
    sub.add_argument("--wait", action="store_true", help="print the agent's reply when its turn ends")
    sub.add_argument(
        "--timeout",
        type=seconds,
        metavar="S",
        help="with --wait: give up after S seconds (exit 1; a run in this process is then aborted, the "
        "message stays queued if it has not run)",
    )
    sub.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    sub.add_argument(
        "--deliver",
        metavar="NAME/ACCOUNT:TARGET",
        help="stream the reply through a chat adapter as it is written, e.g. tg/main:chat:12345",
    )
    sub.set_defaults(handler="nexus.cli.send_cmd:send_command")


def add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus serve``: the broker and the HTTP API (docs/server.md)."""
    sub = commands.add_parser(
        "serve",
        help=summary,
        description=(
            "One long-running process: the broker drains every agent's queue, the web UI is at /,\n"
            "and the HTTP API (OpenAPI at /docs) serves agents, sessions, messages and an OpenAI-compatible\n"
            "/v1/chat/completions. SIGTERM/SIGINT stop it cleanly: runs aborted and kept, queues durable.\n"
            "A non-loopback --host needs [server] tokens in nexus.toml. Each request is logged on stderr\n"
            "(method, path, status, time; never a header, body or query) unless --quiet."
        ),
        epilog="examples:\n  nexus serve\n  nexus serve --port 9000\n  NEXUS_TOKEN=s3cret nexus serve --host 0.0.0.0\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("--host", metavar="ADDR", help="address to listen on (default: [server] host, 127.0.0.1)")
    sub.add_argument(
        "--port", type=int, metavar="PORT", help="port to listen on (default: [server] port, 8700; 0: any free port)"
    )
    sub.add_argument("--quiet", action="store_true", help="no request lines on stderr (start, stop and errors only)")
    add_log_options(sub)
    sub.set_defaults(handler="nexus.cli.serve_cmd:serve_command")
