"""Arguments of ``nexus route``: route a task, rebuild the index, compare the A/B arms, give feedback."""

from __future__ import annotations

import argparse

from nexus.cli._input import utf8_name

ACTIONS = ("reindex", "stats", "feedback")


def add_route(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus route TASK | reindex | stats | feedback``."""
    sub = commands.add_parser(
        "route",
        help=summary,
        description=(
            "nexus route TASK: where TASK belongs in past work: the checkpoint (a turn) to fork from,\n"
            "with its calibrated confidence and the alternatives, or 'new' when nothing fits\n"
            "(docs/routing.md). The decision is recorded in the ledger.\n"
            "nexus route reindex: rebuild the index from every turn.\n"
            "nexus route stats: compare the smart and explicit arms (counts, completion, tokens, cost).\n"
            "nexus route feedback DECISION good|bad: record a verdict on a decision."
        ),
        epilog=(
            'examples:\n  nexus route "fix the flaky checkout test"\n  nexus route "add the retry test" --agent coder'
            " --json\n  nexus route stats --since 7d\n  nexus route feedback 01J... good\n"
            '  nexus route --task stats      # route the word "stats" itself\n'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("words", metavar="TASK", nargs="*", help="the task (or reindex, stats, feedback ID good|bad)")
    sub.add_argument("--task", metavar="TEXT", help="the task, when it is one of the action words")
    sub.add_argument("--agent", metavar="ID", type=utf8_name, help="only this agent's past work")
    sub.add_argument("--limit", metavar="N", type=int, default=5, help="alternatives to show (default 5)")
    sub.add_argument("--since", metavar="WHEN", help="stats: decisions since 7d, 12h, 30m or a date (YYYY-MM-DD)")
    sub.add_argument("--note", metavar="TEXT", help="feedback: a note kept with the verdict")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub.set_defaults(handler="nexus.cli.route_cmd:route_command")
