"""``nexus route``: smart routing from the command line (docs/routing.md).

``route TASK`` decides and records; ``reindex`` rebuilds the index; ``stats`` settles the outcomes of
past decisions and compares the A/B arms; ``feedback`` records a user's verdict. A bad request (an
empty task, an unknown agent, a malformed ``--since``) exits 2 and stores nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nexus.cli._input import terminal_text
from nexus.cli._route_parser import ACTIONS

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger
    from nexus.routing import Router, SmartRouteResult

_SINCE = re.compile(r"^(\d+)\s*([dhm])$")


def route_command(args: argparse.Namespace) -> int:
    """Run ``nexus route``."""
    from nexus.cli._state import checked_config
    from nexus.errors import UsageError

    config = checked_config(args.config)
    words = list(args.words)
    action = words[0] if words and args.task is None and words[0] in ACTIONS else None
    if action is None:
        task = args.task if args.task is not None else " ".join(words)
        if not task.strip():
            raise UsageError('give the task: nexus route "what to do" (or reindex, stats, feedback)')
        return _with_router(config, lambda router: _route(router, task, args))
    if action == "feedback":
        return _feedback(config, words[1:], args.note)
    if action == "stats":
        since = parse_since(args.since)
        return _with_router(config, lambda router: _stats(router, since, args.json), embedder=False)
    return _with_router(config, _reindex)


def parse_since(text: str | None, now: float | None = None) -> int:
    """``--since``: ``7d``/``12h``/``30m`` ago or a date (``YYYY-MM-DD``, UTC) as Unix ms; none: 0."""
    from nexus.errors import UsageError

    if text is None:
        return 0
    now = time.time() if now is None else now
    match = _SINCE.match(text.strip())
    if match:
        seconds = int(match.group(1)) * {"d": 86400, "h": 3600, "m": 60}[match.group(2)]
        return int((now - seconds) * 1000)
    try:
        return int(datetime.strptime(text.strip(), "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        raise UsageError(f"--since {text!r}: give 7d, 12h, 30m or a date YYYY-MM-DD") from None


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _open_ledger(config: NexusConfig) -> Ledger:
    """The configured ledger, an SQLite file or a PostgreSQL database (routing works on both); the router
    runs on this thread, which is what the PostgreSQL pool's synchronous transactions are for."""
    from nexus.ledger import Ledger

    target = config.database_target
    if isinstance(target, str):
        import asyncio

        return asyncio.run(Ledger.connect(target))
    return Ledger.open(target)


def _with_router(config: NexusConfig, job: Any, *, embedder: bool = True) -> int:
    from nexus.routing import Router, RouteSettings, RoutingError

    r = config.routing
    settings = RouteSettings(
        r.embedder if embedder else "none",
        r.embedding_base_url,
        r.embedding_model,
        r.embedding_api_key_env,
        r.threshold,
        r.max_task_chars,
        model_path=str(config.routing_model_path or ""),
    )
    with _open_ledger(config) as ledger:
        try:
            router = Router(ledger, settings)
        except ImportError as exc:
            from nexus.errors import NexusError

            raise NexusError(f"smart routing needs numpy ({exc}); pip install 'nexus-broker[routing]'") from None
        except RoutingError as exc:  # e.g. a [routing] model file that is not one
            from nexus.errors import ConfigError

            raise ConfigError(str(exc)) from None
        try:
            return int(job(router))
        finally:
            router.close()


def _route(router: Router, task: str, args: argparse.Namespace) -> int:
    from nexus.errors import UsageError
    from nexus.routing import RoutingError

    try:
        result = router.route(task, agent=args.agent, limit=args.limit)
    except RoutingError as exc:
        raise UsageError(str(exc)) from None
    print(json.dumps(result.to_json(), indent=1) if args.json else terminal_text(render(result)))
    return 0


def render(result: SmartRouteResult) -> str:
    lines = [f"{result.mode}  confidence {result.confidence:.2f} (threshold {result.threshold:.2f})"]
    for note in result.notes:
        lines.append(f"note: {note}")
    for i, scored in enumerate(result.scored):
        c = scored.checkpoint
        mark = "->" if i == 0 else "  "
        owner = f" [{c.agent_id}]" if c.agent_id else ""
        lines.append(f"{mark} {scored.probability:.2f}  {c.session_key}{owner} @{c.position}  turn {c.turn_id}")
        lines.append(f"         {c.context}")
    by = result.decided_by
    if by:
        lines.append(f"decided by: embedder {by.get('embedder')}, model {by.get('model')}")
    if result.decision_id:
        lines.append(f"decision {result.decision_id} (nexus route feedback {result.decision_id} good|bad)")
    return "\n".join(lines)


def _reindex(router: Router) -> int:
    started = time.perf_counter()
    made = router.reindex()
    print(f"indexed {made} checkpoint{'s' if made != 1 else ''} in {time.perf_counter() - started:.1f} s")
    return 0


def _stats(router: Router, since: int, as_json: bool) -> int:
    from nexus.routing import compare

    router.decisions.settle()
    arms = compare(router.decisions.decisions(since))
    if as_json:
        print(json.dumps([_arm_json(a) for a in arms], indent=1))
        return 0
    if not arms:  # with --since, decisions before that date may exist: say which question had no answer
        print("no routing decisions recorded yet" if not since else f"no routing decisions since {_day(since)} (UTC)")
        return 0
    print(
        "| arm | decisions | settled | existing | completion [95% CI] | tokens/task [95% CI] | cost/task "
        "| good feedback |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for a in arms:
        print(
            f"| {a.arm} | {a.decisions} | {a.settled} | {a.existing} | {a.completion.show()} | "
            f"{a.tokens.show(0)} | {a.cost.show(4)} | {a.good_feedback.show()} |"
        )
    return 0


def _arm_json(arm: Any) -> dict[str, Any]:
    def interval(i: Any) -> dict[str, Any]:
        return {"value": i.value, "low": i.low, "high": i.high, "n": i.n}

    return {
        "arm": arm.arm,
        "decisions": arm.decisions,
        "settled": arm.settled,
        "existing": arm.existing,
        "completion": interval(arm.completion),
        "tokens": interval(arm.tokens),
        "cost": interval(arm.cost),
        "good_feedback": interval(arm.good_feedback),
    }


def _feedback(config: NexusConfig, words: list[str], note: str | None) -> int:
    from nexus.errors import UsageError
    from nexus.routing import RoutingError, open_route_store

    if len(words) != 2 or words[1] not in ("good", "bad"):
        raise UsageError("nexus route feedback DECISION_ID good|bad [--note TEXT]")
    with _open_ledger(config) as ledger:
        store = open_route_store(ledger)
        try:
            store.feedback(words[0], 1 if words[1] == "good" else -1, note)
        except RoutingError as exc:
            raise UsageError(str(exc)) from None
        finally:
            store.close()
    print(f"decision {words[0]}: {words[1]}", file=sys.stderr)
    return 0
