"""Build the routing evaluation set: real ledger sessions from the hand-written corpus, and its tasks.

``build(home)`` writes ``home/agents.db`` and the workspaces under ``home/workspaces/`` the way a broker
run would leave them: each turn's request is accepted as a queue item of its agent (``BrokerStore``),
the turn is written with real messages — the user's request, an assistant message with ``read`` /
``edit`` / ``write`` tool calls, their results, the final reply — and the item is delivered by it; the
files the tools wrote are written on disk. Forks are ledger forks (nothing copied). Turns are written in
the order of their (synthetic) times, across sessions, and ``on_turn(turn_id)`` is called after each, so
a caller can index incrementally as a live system would. After the last turn, the files of the *stale*
sessions are changed on disk (``stale_files``): their context no longer matches the workspace.

Every task gets a split from a hash of its text (``dev`` ~40 % of each kind, ``test`` the rest): calibration and
thresholds are fitted on ``dev`` only; ``test`` is held out. Run ``python build.py --summary`` to print
the counts and write ``tasks.json`` (for reading; the bench rebuilds the set itself, deterministically).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from nexus.ledger import NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus_auth_cache import SESSIONS as _AUTH_CACHE  # noqa: E402
from corpus_data_ci import SESSIONS as _DATA_CI  # noqa: E402
from corpus_front_pay import SESSIONS as _FRONT_PAY  # noqa: E402
from corpus_long import SESSIONS as _LONG  # noqa: E402
from corpus_ops_ml import SESSIONS as _OPS_ML  # noqa: E402
from new_tasks import NEW_TASKS  # noqa: E402
from spec import E, Sess, T  # noqa: E402

SESSIONS: list[Sess] = [*_AUTH_CACHE, *_DATA_CI, *_FRONT_PAY, *_OPS_ML, *_LONG]
NOW_MS = 1_790_000_000_000
"""The evaluation's "now" (fixed, so recency features are the same on every run)."""
DAY_MS = 86_400_000
DEV_SHARE = 50


@dataclass(frozen=True, slots=True)
class EvalTask:
    """One task: its text, what kind of case it is, the turn it should land on (``None``: new), its split."""

    id: str
    text: str
    kind: str  # continue | branch | stale | new
    expected: str | None
    split: str  # dev | test
    session: str | None


@dataclass(slots=True)
class EvalSet:
    """What :func:`build` made: the tasks, the turns written, and where the ledger and workspaces are."""

    home: Path
    tasks: list[EvalTask]
    turns: int = 0
    sessions: int = 0
    forks: int = 0
    stale_files: list[Path] = field(default_factory=list)


@dataclass(slots=True)
class _Planned:
    """One turn to write: when, in which (session, branch), its spec and where it hangs."""

    at_ms: int
    sess: Sess
    branch: str  # the session key of the branch (the session's key or the fork's)
    episode: int
    index: int
    turn: T
    fork_of: tuple[str, int] | None = None  # (parent branch, parent episode) for a fork's first turn


def _assign_splits(tasks: list[EvalTask]) -> list[EvalTask]:
    """``dev`` for the first ~40 % of each kind in the order of a hash of the text, ``test`` for the rest:
    stable across runs and machines, and every kind is in both splits in the same proportion."""
    out: list[EvalTask] = []
    for kind in sorted({t.kind for t in tasks}):
        ranked = sorted((t for t in tasks if t.kind == kind), key=lambda t: t.id)
        dev = round(len(ranked) * DEV_SHARE / 100)
        out += [replace(t, split="dev" if i < dev else "test") for i, t in enumerate(ranked)]
    order = {t.id: i for i, t in enumerate(tasks)}
    return sorted(out, key=lambda t: order[t.id])


def _plan() -> list[_Planned]:
    """Every turn of every session and fork with its time; forks start a day after their parent."""
    planned: list[_Planned] = []
    for sess in SESSIONS:
        start = NOW_MS - int(sess.age_days * DAY_MS)
        planned += _plan_branch(sess, sess.key, sess.episodes, start, None)
        for number, fork in enumerate(sess.forks):
            fork_start = start + DAY_MS // 2 + number * 3_600_000
            planned += _plan_branch(sess, fork.key, fork.episodes, fork_start, (sess.key, fork.at))
    planned.sort(key=lambda p: p.at_ms)
    return planned


def _plan_branch(
    sess: Sess, branch: str, episodes: list[E], start: int, fork_of: tuple[str, int] | None
) -> list[_Planned]:
    out: list[_Planned] = []
    step = 0
    for e_index, episode in enumerate(episodes):
        for t_index, turn in enumerate(episode.turns):
            first = fork_of if step == 0 else None
            out.append(_Planned(start + step * 1_200_000, sess, branch, e_index, t_index, turn, first))
            step += 1
    return out


def build(home: Path, *, on_turn: Callable[[str], object] | None = None) -> EvalSet:
    """Write the evaluation ledger and workspaces into ``home`` (empty) and return the tasks."""
    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerStore

    home.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.open(home / "agents.db")
    store = BrokerStore(ledger.database)
    for agent in sorted({s.agent for s in SESSIONS}):
        store.add_agent(agent, role="worker", spec={})
    writer = _Writer(ledger, store, home / "workspaces")
    for planned in _plan():
        turn_id = writer.write(planned)
        if on_turn is not None:
            on_turn(turn_id)
    stale = writer.change_stale_files()
    tasks = _tasks(writer.ends, writer.heads)
    ledger.close()
    return EvalSet(home, tasks, len(writer.ends_all), len(SESSIONS), sum(len(s.forks) for s in SESSIONS), stale)


class _Writer:
    """Writes planned turns as a broker run would, and remembers where each episode ended."""

    def __init__(self, ledger: object, store: object, workspaces: Path) -> None:
        self.ledger = ledger
        self.store = store
        self.workspaces = workspaces
        self.ends: dict[tuple[str, int], str] = {}  # (branch, episode) -> last completed turn
        self.heads: dict[str, str] = {}  # branch -> newest turn
        self.ends_all: list[str] = []
        self.labels: dict[str, str] = {}
        self.touched: dict[str, set[Path]] = {}

    def label(self, sess: Sess, branch: str) -> str:
        from nexus.broker.sessions import session_label_for

        return session_label_for(sess.agent, f"agent:{sess.agent}", f"task:{branch}")

    def write(self, p: _Planned) -> str:
        from nexus.llm.types import UserMessage

        label = self.label(p.sess, p.branch)
        if p.fork_of is not None:
            parent_turn = self.ends[p.fork_of]
            run_inline(
                self.ledger.sessions.create(
                    NewSession(
                        label,
                        origin="fork",
                        head_turn_id=parent_turn,
                        routing_key=f"task:{p.branch}",
                        metadata={"agent": p.sess.agent},
                    )
                )
            )
        message_id = f"eval-{p.branch}-{p.episode}-{p.index}"
        item, _ = self.store.accept(  # type: ignore[attr-defined]
            agent_id=p.sess.agent,
            session_label=label,
            message_id=message_id,
            sender="user",
            message={"id": message_id, "content": p.turn.ask},
            mode="followup",
            session_key=f"task:{p.branch}",
        )
        workspace = self.workspaces / p.sess.workspace
        response = list(_response(p, workspace, self.touched.setdefault(p.sess.key, set())))
        turn_id = run_inline(
            self.ledger.turns.write(
                TurnWrite(
                    label,
                    None,
                    query_messages=[UserMessage(p.turn.ask, timestamp=p.at_ms)],
                    response_messages=response,
                    status=p.turn.status,
                    completed_at=p.at_ms + 90_000,
                    details=TurnDetails(
                        started_at=p.at_ms, workspace_path=str(workspace), model="eval-model", provider="eval"
                    ),
                )
            )
        )
        self.store.deliver([item.id], turn_id)  # type: ignore[attr-defined]
        if p.turn.status == "completed":
            self.ends[(p.branch, p.episode)] = turn_id
        self.heads[p.branch] = turn_id
        self.ends_all.append(turn_id)
        return turn_id

    def change_stale_files(self) -> list[Path]:
        """The stale sessions' files change on disk after their work (a reset checkout, someone's edit)."""
        changed: list[Path] = []
        for sess in SESSIONS:
            if not sess.stale:
                continue
            for path in sorted(self.touched.get(sess.key, ())):
                with path.open("a", encoding="utf-8") as f:
                    f.write("# changed outside the session: the checkout was reset to main\n")
                changed.append(path)
        return changed


def _response(p: _Planned, workspace: Path, touched: set[Path]) -> Iterator[object]:
    """The turn's response messages, with the tool calls really applied to the workspace."""
    from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage

    at = p.at_ms + 1_000
    prefix = f"{p.branch}-{p.episode}-{p.index}"
    reads, writes = p.turn.read_paths(), p.turn.write_paths()
    if reads:
        calls = [ToolCall(f"{prefix}-r{i}", "read", {"path": path}) for i, path in enumerate(reads)]
        yield AssistantMessage(
            [TextContent("Let me look at the code first."), *calls], stop_reason="tool_use", timestamp=at
        )
        for call, path in zip(calls, reads, strict=True):
            text = _ensure_file(workspace / path, p)
            touched.add(workspace / path)
            yield ToolResultMessage(call.id, "read", [TextContent(text)], timestamp=at + 10)
    if writes:
        calls = [_write_call(f"{prefix}-w{i}", workspace / path, path, p) for i, path in enumerate(writes)]
        yield AssistantMessage([TextContent("Making the change."), *calls], stop_reason="tool_use", timestamp=at + 20)
        for call, path in zip(calls, writes, strict=True):
            touched.add(workspace / path)
            yield ToolResultMessage(call.id, call.name, [TextContent(f"Successfully wrote {path}")], timestamp=at + 30)
    if p.turn.status == "completed":
        yield AssistantMessage([TextContent(p.turn.reply)], stop_reason="stop", timestamp=at + 40)
    else:
        yield AssistantMessage(
            [TextContent(p.turn.reply)], stop_reason="error", error_message=p.turn.reply, timestamp=at + 40
        )


def _ensure_file(path: Path, p: _Planned) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {path.name}: part of {p.sess.workspace}\n", encoding="utf-8")
    return path.read_text(encoding="utf-8")


def _write_call(call_id: str, path: Path, rel: str, p: _Planned) -> object:
    """An ``edit`` of a file that exists, a ``write`` of a new one; the change is made on disk."""
    from nexus.llm.types import ToolCall

    line = f"# {p.branch}: {p.turn.ask}\n"
    if path.exists():
        old = path.read_text(encoding="utf-8")
        path.write_text(old + line, encoding="utf-8")
        last = old.splitlines(keepends=True)[-1] if old else ""
        return ToolCall(call_id, "edit", {"path": rel, "oldText": last, "newText": last + line})
    path.parent.mkdir(parents=True, exist_ok=True)
    content = f"# {path.name}: part of {p.sess.workspace}\n{line}"
    path.write_text(content, encoding="utf-8")
    return ToolCall(call_id, "write", {"path": rel, "content": content})


def _tasks(ends: dict[tuple[str, int], str], heads: dict[str, str]) -> list[EvalTask]:
    tasks: list[EvalTask] = []
    by_key = {s.key: s for s in SESSIONS}
    for sess in SESSIONS:
        target = by_key[sess.fresh_twin].key if sess.stale and sess.fresh_twin else sess.key
        twinned = sess.stale or any(s.fresh_twin == sess.key for s in SESSIONS)
        for e_index, episode in enumerate(sess.episodes):
            kind = "stale" if twinned else "branch" if sess.forks else "continue"
            tasks += [_task(text, kind, ends[(target, e_index)], sess.key) for text in episode.tasks]
        for fork in sess.forks:
            for e_index, episode in enumerate(fork.episodes):
                tasks += [_task(text, "branch", ends[(fork.key, e_index)], fork.key) for text in episode.tasks]
            tasks += [_task(text, "branch", heads[sess.key], sess.key) for text in fork.parent_tasks]
    tasks += [_task(text, "new", None, None) for text in NEW_TASKS]
    return _assign_splits(tasks)


def _task(text: str, kind: str, expected: str | None, session: str | None) -> EvalTask:
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return EvalTask(f"t-{digest}", text, kind, expected, "", session)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="an empty directory to build the set in")
    parser.add_argument("--summary", action="store_true", help="print counts and write tasks.json into --home")
    args = parser.parse_args()
    built = build(args.home)
    if args.summary:
        counts: dict[str, dict[str, int]] = {}
        for task in built.tasks:
            counts.setdefault(task.kind, {"dev": 0, "test": 0})[task.split] += 1
        print(f"sessions {built.sessions} (+{built.forks} forks), turns {built.turns}, tasks {len(built.tasks)}")
        for kind, split in sorted(counts.items()):
            print(f"  {kind:9} dev {split['dev']:3}  test {split['test']:3}")
        print(f"stale files changed after indexing: {len(built.stale_files)}")
        rows = [
            {"id": t.id, "text": t.text, "kind": t.kind, "split": t.split, "session": t.session} for t in built.tasks
        ]
        (args.home / "tasks.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
