"""Fitting the router's scoring model on the dev split (``bench_routing.py --fit``).

1. Ranking: the signals of every candidate of every dev task that has a checkpoint among its
   candidates; a conditional logit (``nexus.routing._model.fit_ranking``) puts the right one first.
2. Confidence: with those weights, each dev task's best candidate; a logistic fit of "it is the right
   checkpoint" on what it looks like (``CONFIDENCE_FEATURES``), tasks that belong nowhere included. The
   features are standardized for the fit (so one penalty suits them all; the weights are folded back to
   raw units for ``model.json``) and the penalty is the one whose fits on four fifths of the dev tasks
   decide the held-out fifth best (a weak penalty fitted every quirk of the dev tasks: cross-validated
   ``new`` F1 0.71 at 0.3, 0.82 at 10).
3. Threshold: the confidence cut that makes the most dev decisions right.

``cross_validated`` is how a change to the signals is judged without the test split: the whole fit on four
fifths of the dev tasks, the held-out fifth decided by it, for a few ways of cutting the folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from build import NOW_MS, EvalTask

L2_CHOICES = (0.1, 0.3, 1.0, 3.0)
CALIBRATION_L2_CHOICES = (0.3, 1.0, 3.0, 10.0, 30.0)
FOLDS = 5


def fit_model(router: Any, dev: Sequence[EvalTask]) -> Any:
    import numpy as np

    from nexus.routing._model import (
        CONFIDENCE_FEATURES,
        PRIOR,
        ScoringModel,
        confidence_values,
        fit_ranking,
    )

    per_task = [(task, *router.candidates(task.text, now_ms=NOW_MS)) for task in dev]
    groups = []
    for task, candidates, matrix in per_task:
        right = [i for i, c in enumerate(candidates) if c.stored.turn_id == task.expected]
        if right:
            groups.append((np.asarray(matrix), right[0]))
    l2 = _cross_validated_l2(groups, PRIOR)
    weights = fit_ranking(groups, l2=l2, prior=PRIOR)
    ranking = ScoringModel(tuple(weights), (0.0,) * (len(CONFIDENCE_FEATURES) + 1), 0.5)
    rows, correct, is_new = [], [], []
    for task, candidates, matrix in per_task:
        is_new.append(task.expected is None)
        if not candidates:
            rows.append([0.0] * len(CONFIDENCE_FEATURES))
            correct.append(0.0)
            continue
        scores = ranking.scores(matrix)
        order = sorted(range(len(candidates)), key=lambda i: -float(scores[i]))
        values = confidence_values(matrix, scores, ranking.shares(scores), order)
        rows.append([values[name] for name in CONFIDENCE_FEATURES])
        correct.append(float(candidates[order[0]].stored.turn_id == task.expected))
    x, y = np.asarray(rows), np.asarray(correct)
    calibration_l2 = _cross_validated_calibration_l2(x, y, is_new, np.asarray(correct))
    calib, bias = _fit_standardized(x, y, calibration_l2)
    model = ScoringModel(tuple(weights), (*calib, bias), 0.5)
    confidence = [model.confidence(dict(zip(CONFIDENCE_FEATURES, row, strict=True))) for row in rows]
    threshold = _best_cut(confidence, correct, is_new)
    note = (
        f"dev split of the evaluation set, {len(dev)} tasks; ranking l2 {l2}, confidence l2 {calibration_l2}"
        f" (standardized), both by {FOLDS}-fold cross-validation"
    )
    return ScoringModel(tuple(weights), (*calib, bias), threshold, note)


def owners(router: Any) -> dict[str, str]:
    """The agent that owns each checkpoint's session, by turn id."""
    snap = router.index.snapshot()
    return {r.turn_id: r.agent_id for r in router.store.rows([int(i) for i in snap.ids[: snap.n]]) if r.agent_id}


def blank_model() -> Any:
    """A model of zeros with the signals this code computes: what a router starts from before a fit."""
    from nexus.routing._model import CONFIDENCE_FEATURES, FEATURES, ScoringModel

    return ScoringModel((0.0,) * len(FEATURES), (0.0,) * (len(CONFIDENCE_FEATURES) + 1), 0.5)


def cross_validated(router: Any, dev: Sequence[EvalTask], seeds: int = 4) -> tuple[list[dict[str, Any]], Any]:
    """Each dev task decided by a model fitted on the other folds (``FOLDS`` folds by a hash of the task id and
    the seed), once per seed: the ``answers`` that ``evaluate.metrics`` scores, and the decisions within one
    agent's work (``evaluate.Scoped``, summed over the seeds). Restores ``router.model``."""
    import hashlib

    from evaluate import Scoped, run_router, run_scoped

    shipped, runs, scoped = router.model, [], Scoped()
    try:
        for seed in range(seeds):
            fold = {t.id: int(hashlib.sha1(f"{seed}{t.id}".encode()).hexdigest(), 16) % FOLDS for t in dev}
            answers: dict[str, Any] = {}
            for held in range(FOLDS):
                router.model = fit_model(router, [t for t in dev if fold[t.id] != held])
                answers.update(run_router(router, [t for t in dev if fold[t.id] == held])[0])
                run_scoped(router, [t for t in dev if fold[t.id] == held], scoped)
            runs.append(answers)
    finally:
        router.model = shipped
    return runs, scoped


def _cross_validated_l2(groups: list[tuple[Any, int]], prior: tuple[float, ...]) -> float:
    """The penalty whose fits, each on four fifths of the dev tasks, rank the held-out fifth best."""
    import numpy as np

    from nexus.routing._model import fit_ranking

    best, best_hits = L2_CHOICES[0], -1
    for l2 in L2_CHOICES:
        hits = 0
        for fold in range(FOLDS):
            train = [g for i, g in enumerate(groups) if i % FOLDS != fold]
            w = np.asarray(fit_ranking(train, l2=l2, prior=prior))
            hits += sum(int(np.argmax(x @ w) == right) for i, (x, right) in enumerate(groups) if i % FOLDS == fold)
        if hits > best_hits:
            best, best_hits = l2, hits
    return best


def _fit_standardized(x: Any, y: Any, l2: float) -> tuple[list[float], float]:
    """A logistic fit on standardized features, its weights folded back to raw units."""
    import numpy as np

    from nexus.routing._model import fit_logistic

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    weights, bias = fit_logistic((x - mean) / scale, y, l2=l2)
    raw = np.asarray(weights) / scale
    return [float(v) for v in raw], float(bias - raw @ mean)


def _cross_validated_calibration_l2(x: Any, y: Any, is_new: list[bool], right: Any) -> float:
    """The confidence penalty whose fits, each on four fifths of the dev tasks, decide the held-out fifth best
    (right checkpoint and ``existing``, or ``new`` for a task that belongs nowhere), its cut fitted likewise."""
    import numpy as np

    best, best_right = CALIBRATION_L2_CHOICES[0], -1
    for l2 in CALIBRATION_L2_CHOICES:
        hits = 0
        for fold in range(FOLDS):
            train = np.asarray([i % FOLDS != fold for i in range(len(y))])
            weights, bias = _fit_standardized(x[train], y[train], l2)
            p = 1.0 / (1.0 + np.exp(-np.clip(x @ np.asarray(weights) + bias, -30, 30)))
            cut = _best_cut(list(p[train]), list(right[train]), [n for n, t in zip(is_new, train, strict=True) if t])
            hits += sum(
                1
                for i in range(len(y))
                if not train[i] and ((p[i] >= cut and right[i] == 1.0) or (p[i] < cut and is_new[i]))
            )
        if hits > best_right:
            best, best_right = l2, hits
    return best


def _best_cut(scores: list[float], top_right: list[float], is_new: list[bool]) -> float:
    """The confidence cut with the most right decisions: existing (and right) above, new (and new) below."""
    cuts = sorted(set(scores))
    best, best_right = 0.5, -1
    for i, cut in enumerate(cuts):
        right = sum(
            1 for s, ok, new in zip(scores, top_right, is_new, strict=True) if (s >= cut and ok) or (s < cut and new)
        )
        if right > best_right:
            best_right = right
            best = (cut + cuts[i - 1]) / 2 if i else cut
    return best
