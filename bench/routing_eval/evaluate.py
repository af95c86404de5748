"""Scoring the evaluation set: the router and three baselines on the same tasks, fitted on ``dev`` only.

Each method ranks checkpoints for a task and says ``existing`` or ``new``:

- **router**: the full decision (candidates, signals, model, calibrated confidence, threshold);
- **recency**: the newest checkpoint (of the agent), always ``existing`` (it has no notion of "nothing fits");
- **bm25**: FTS5 BM25 over the same checkpoint texts; ``new`` when the best score per query term is below a
  threshold fitted on ``dev``;
- **embeddings**: cosine over the same vectors; ``new`` when the best cosine is below a threshold fitted on ``dev``.

Metrics, on the ``test`` split unless said otherwise: top-1 and top-3 (tasks that have a checkpoint: is it
first / in the first three), decision accuracy (all tasks: right checkpoint and ``existing``, or ``new``
for a task that belongs nowhere), ``new`` precision / recall / F1, a reliability table of the router's
confidence (does "0.8" come true 8 times in 10), and the router within one agent's work (``run_scoped``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from build import NOW_MS, EvalTask
from fit import _best_cut

Ranked = tuple[list[str], str, float]  # (turn ids best first, existing|new, score used for the decision)


@dataclass(slots=True)
class Metrics:
    top1: float = 0.0
    top3: float = 0.0
    accuracy: float = 0.0
    new_p: float = 0.0
    new_r: float = 0.0
    new_f1: float = 0.0
    by_kind: dict[str, float] = field(default_factory=dict)
    n: int = 0


def metrics(tasks: Sequence[EvalTask], answers: dict[str, Ranked]) -> Metrics:
    has = [t for t in tasks if t.expected is not None]
    top1 = sum(1 for t in has if answers[t.id][0][:1] == [t.expected])
    top3 = sum(1 for t in has if t.expected in answers[t.id][0][:3])
    right = sum(1 for t in tasks if _right(t, answers[t.id]))
    said_new = [t for t in tasks if answers[t.id][1] == "new"]
    truly_new = [t for t in tasks if t.expected is None]
    tp = sum(1 for t in said_new if t.expected is None)
    p = tp / len(said_new) if said_new else 0.0
    r = tp / len(truly_new) if truly_new else 0.0
    kinds: dict[str, list[int]] = {}
    for t in tasks:
        k = kinds.setdefault(t.kind, [0, 0])
        k[0] += _right(t, answers[t.id])
        k[1] += 1
    return Metrics(
        top1 / max(1, len(has)),
        top3 / max(1, len(has)),
        right / max(1, len(tasks)),
        p,
        r,
        2 * p * r / (p + r) if p + r else 0.0,
        {k: v[0] / v[1] for k, v in kinds.items()},
        len(tasks),
    )


def _right(task: EvalTask, answer: Ranked) -> bool:
    if task.expected is None:
        return answer[1] == "new"
    return answer[1] == "existing" and answer[0][:1] == [task.expected]


def run_router(router: Any, tasks: Sequence[EvalTask]) -> tuple[dict[str, Ranked], dict[str, float]]:
    answers, confidence = {}, {}
    for t in tasks:
        result = router.route(t.text, record=False, catch_up=False, now_ms=NOW_MS)
        ids = [s.checkpoint.turn_id for s in result.scored]
        answers[t.id] = (ids, result.mode, result.confidence)
        confidence[t.id] = result.confidence
    return answers, confidence


def run_baseline(rank: Callable[[str], tuple[list[str], float]], tasks: Sequence[EvalTask]) -> dict[str, Ranked]:
    """A baseline's ranking, with its decision threshold fitted on the dev tasks."""
    raw = {t.id: rank(t.text) for t in tasks}
    dev = [t for t in tasks if t.split == "dev"]
    cut = _best_cut(
        [raw[t.id][1] for t in dev],
        [float(raw[t.id][0][:1] == [t.expected]) for t in dev],
        [t.expected is None for t in dev],
    )
    return {
        t.id: (raw[t.id][0], "existing" if raw[t.id][1] >= cut and raw[t.id][0] else "new", raw[t.id][1]) for t in tasks
    }


def baselines(router: Any) -> dict[str, Callable[[str], tuple[list[str], float]]]:
    """Rankers over the router's own store and index: recency, BM25 only, embeddings only."""
    import numpy as np

    from nexus.routing._index import semantic
    from nexus.routing._words import query_terms as terms

    snap = router.index.snapshot()
    turn_of = {r.id: r.turn_id for r in router.store.rows([int(i) for i in snap.ids[: snap.n]])}
    newest = [turn_of[int(snap.ids[i])] for i in np.argsort(-snap.completed[: snap.n], kind="stable")[:10]]

    def recency(_text: str) -> tuple[list[str], float]:
        return newest, 1.0  # always "existing": recency has no notion of a task that fits nowhere

    def bm25(text: str) -> tuple[list[str], float]:
        words = terms(text)
        hits = router.index.postings.search(words, 10) if words else []
        per_term = hits[0][1] / max(1, len(words)) if hits else 0.0
        return [turn_of[int(snap.ids[row])] for row, _ in hits], per_term

    def embeddings(text: str) -> tuple[list[str], float]:
        vector = np.frombuffer(router.guard.embed([text])[0], np.float32)
        hits = semantic(snap, vector, 10, None)
        return [turn_of[int(snap.ids[r])] for r, _ in hits], hits[0][1] if hits else 0.0

    return {"recency only": recency, "BM25 only": bm25, "embeddings only": embeddings}


def print_misses(router: Any, tasks: Sequence[EvalTask], answers: dict[str, Ranked], title: str) -> None:
    """The tasks decided wrong, by kind: what was asked, what was expected (and its rank), what was chosen."""
    snap = router.index.snapshot()
    rows = router.store.rows([int(i) for i in snap.ids[: snap.n]])
    context = {r.turn_id: f"{r.session_label}@{r.position}: {r.context[:90]!r}" for r in rows}
    print(f"\n### Misses ({title})")
    for kind in ("continue", "branch", "stale", "new"):
        wrong = [t for t in tasks if t.kind == kind and not _right(t, answers[t.id])]
        print(f"\n#### {kind}: {len(wrong)} of {sum(t.kind == kind for t in tasks)} wrong\n")
        for t in wrong:
            ids, mode, confidence = answers[t.id]
            rank = ids.index(t.expected) + 1 if t.expected in ids else 0
            top = context.get(ids[0], "?") if ids else "nothing"
            print(f"- {t.text[:110]!r}: {mode} {confidence:.2f}, chose {top}")
            if t.expected is not None:
                print(f"  expected (rank {rank or '>limit'}) {context.get(t.expected, '?')}")


def reliability(
    tasks: Sequence[EvalTask], answers: dict[str, Ranked], bins: int = 5
) -> list[tuple[str, int, float, float]]:
    """``(bin, count, mean confidence, share where the best checkpoint was right)`` per confidence bin.

    "Right" is what confidence claims: the best candidate is the task's checkpoint (never, for a task
    that belongs nowhere)."""
    rows = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [t for t in tasks if lo <= answers[t.id][2] < hi or (b == bins - 1 and answers[t.id][2] == 1.0)]
        if not inside:
            rows.append((f"{lo:.1f}-{hi:.1f}", 0, 0.0, 0.0))
            continue
        mean = sum(answers[t.id][2] for t in inside) / len(inside)
        hit = sum(1 for t in inside if t.expected is not None and answers[t.id][0][:1] == [t.expected]) / len(inside)
        rows.append((f"{lo:.1f}-{hi:.1f}", len(inside), mean, hit))
    return rows


def expected_calibration_error(rows: list[tuple[str, int, float, float]]) -> float:
    total = sum(r[1] for r in rows)
    return sum(r[1] * abs(r[2] - r[3]) for r in rows) / total if total else 0.0


@dataclass(slots=True)
class Scoped:
    """Decisions within one agent's work (``nexus send --route smart AGENT`` looks only there), summed."""

    own_tasks: int = 0
    own_right: float = 0.0  # within the agent holding the checkpoint: right checkpoint and existing
    other_tasks: int = 0
    other_new: float = 0.0  # within each other agent (the checkpoint out of scope; every agent for a new task): new
    other_confidence: float = 0.0  # the confidence there
    other_worst: float = 0.0  # the highest confidence there

    def row(self) -> str:
        """``own tasks | right | other tasks | new | mean confidence | highest`` as a table row's cells."""
        own = self.own_right / max(1, self.own_tasks)
        new, mean = self.other_new / max(1, self.other_tasks), self.other_confidence / max(1, self.other_tasks)
        return f"{self.own_tasks} | {own:.3f} | {self.other_tasks} | {new:.3f} | {mean:.3f} | {self.other_worst:.3f}"


def run_scoped(router: Any, tasks: Sequence[EvalTask], into: Scoped | None = None) -> Scoped:
    """Each task routed within the work of the agent holding its checkpoint, and within each other agent's
    (a task's decisions among the other agents count as one task: their mean); added to ``into``."""
    from fit import owners

    owner = owners(router)
    agents = sorted(router.store.known_agents())
    out = into if into is not None else Scoped()
    for t in tasks:
        home = owner.get(t.expected) if t.expected is not None else None
        if home is not None:
            result = router.route(t.text, agent=home, record=False, catch_up=False, now_ms=NOW_MS)
            out.own_tasks += 1
            chosen = result.checkpoint.turn_id if result.checkpoint is not None else None
            out.own_right += float(result.mode == "existing" and chosen == t.expected)
        others = [
            router.route(t.text, agent=a, record=False, catch_up=False, now_ms=NOW_MS) for a in agents if a != home
        ]
        out.other_tasks += 1
        out.other_new += sum(r.mode == "new" for r in others) / len(others)
        out.other_confidence += sum(r.confidence for r in others) / len(others)
        out.other_worst = max(out.other_worst, *(r.confidence for r in others))
    return out
