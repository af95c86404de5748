"""The scorer's parameters: a ranking of the candidates, a calibrated confidence in the best one, a threshold.

Ranking: ``score = w · signals``, fitted as a conditional logit — for each task of the dev split, a
softmax over its candidates should put its checkpoint first (the right objective for "top-1", unlike a
per-candidate classifier that mostly learns to reject). ``p`` of a candidate is its softmax share.

Confidence: a logistic fit (Platt scaling) of "the best candidate is the right checkpoint" on what
the best candidate looks like — its score, its lead over the second, its share, how much of the task
the index knows at all — over all dev tasks, those that belong nowhere included. ``existing`` when it
clears ``threshold``, the cut with the most right dev decisions. ``bench/bench_routing.py --fit`` fits
all of it on the dev split only and writes ``model.json`` beside this module.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass

FEATURES: tuple[str, ...] = (
    "cos",
    "cos_gap",
    "lex",
    "lex_abs",
    "coverage",
    "unknown",
    "rrf",
    "facet",
    "quality",
    "own",
    "carried",
    "continues",
    "context",
    "superseded",
    "fresh",
    "recency",
)
CONFIDENCE_FEATURES: tuple[str, ...] = ("score", "lead", "share", "unknown", "cos", "coverage", "lex_abs")


@dataclass(frozen=True, slots=True)
class ScoringModel:
    """Ranking weights per signal, the confidence calibration, and the ``existing`` threshold."""

    weights: tuple[float, ...]
    calibration: tuple[float, ...]  # one weight per CONFIDENCE_FEATURES, then the bias
    threshold: float
    fitted_on: str = ""

    def scores(self, signals: Any) -> Any:
        """The ranking score of each candidate (rows of a ``(k, len(FEATURES))`` array)."""
        import numpy as np

        return signals @ np.asarray(self.weights, np.float64)

    def shares(self, scores: Any) -> Any:
        """Softmax of the scores: each candidate's share of the task."""
        import numpy as np

        z = np.exp(scores - scores.max())
        return z / z.sum()

    def confidence(self, values: dict[str, float]) -> float:
        """The calibrated probability that the best candidate is the right checkpoint."""
        *weights, bias = self.calibration
        z = sum(w * values[name] for w, name in zip(weights, CONFIDENCE_FEATURES, strict=True)) + bias
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "weights": [round(w, 6) for w in self.weights],
            "confidence_features": list(CONFIDENCE_FEATURES),
            "calibration": [round(v, 6) for v in self.calibration],
            "threshold": round(self.threshold, 4),
            "fitted_on": self.fitted_on,
        }


def confidence_values(signals: Any, scores: Any, shares: Any, order: list[int]) -> dict[str, float]:
    """What the confidence is computed from, for candidates ranked by ``order`` (best first)."""
    top = order[0]
    second = float(scores[order[1]]) if len(order) > 1 else float(scores[top]) - 5.0
    row = signals[top]
    return {
        "score": float(scores[top]),
        "lead": float(scores[top]) - second,
        "share": float(shares[top]),
        "unknown": float(row[FEATURES.index("unknown")]),
        "cos": float(row[FEATURES.index("cos")]),
        "coverage": float(row[FEATURES.index("coverage")]),
        "lex_abs": float(row[FEATURES.index("lex_abs")]),
    }


def load_model(raw: dict[str, Any] | None = None) -> ScoringModel:
    """The shipped model (``model.json``), or one from a dict of the same shape."""
    if raw is None:
        raw = json.loads(resources.files("nexus.routing").joinpath("model.json").read_text(encoding="utf-8"))
    if list(raw["features"]) != list(FEATURES) or list(raw["confidence_features"]) != list(CONFIDENCE_FEATURES):
        raise ValueError(f"model.json has features {raw['features']}, this code computes {list(FEATURES)}")
    return ScoringModel(
        tuple(float(w) for w in raw["weights"]),
        tuple(float(v) for v in raw["calibration"]),
        float(raw["threshold"]),
        str(raw.get("fitted_on", "")),
    )


def load_model_file(path: str) -> ScoringModel:
    """The model in the JSON file at ``path`` (``[routing] model``), or the shipped one for ``""``.

    A file that is missing, not JSON, or fitted for other features is a :class:`RoutingError` naming it: a
    router that quietly fell back to the shipped model would decide worse with the embedder it was fitted for.
    """
    if not path:
        return load_model()
    from nexus.routing.errors import RoutingError

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return load_model(raw)
    except OSError as exc:
        raise RoutingError(f"[routing] model = {path!r}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        why = f"no {exc} in it" if isinstance(exc, KeyError) else str(exc)
        raise RoutingError(
            f"[routing] model = {path!r} is not a routing model ({why}); make one with bench_routing.py --fit"
        ) from None


def fit_logistic(x: Any, y: Any, *, l2: float = 1.0, iterations: int = 50) -> tuple[list[float], float]:
    """Weights and bias of an L2-penalized logistic regression (Newton steps; the bias is not penalized)."""
    import numpy as np

    features = np.asarray(x, np.float64)
    labels = np.asarray(y, np.float64)
    design = np.hstack([features, np.ones((features.shape[0], 1))])
    beta = np.zeros(design.shape[1])
    penalty = np.eye(design.shape[1]) * l2
    penalty[-1, -1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -30, 30)))
        gradient = design.T @ (p - labels) + penalty @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty + np.eye(design.shape[1]) * 1e-9
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return [float(v) for v in beta[:-1]], float(beta[-1])


PRIOR: tuple[float, ...] = (2.0, 1.0, 1.5, 1.0, 1.0, 0.0, 1.0, 1.0, 3.0, 1.0, 1.0, -1.0, 1.0, -1.0, 2.0, 0.3)
"""What the weights are pulled towards where the dev split says little (a Gaussian prior): a clean turn
beats a failed one (``quality``), unchanged files beat changed ones (``fresh``), a turn whose work went
on below it is superseded. Few dev tasks exercise these, so the data alone would leave them near zero."""


def fit_ranking(
    groups: list[tuple[Any, int]], *, l2: float = 1.0, prior: tuple[float, ...] | None = None, iterations: int = 100
) -> list[float]:
    """Weights of a conditional logit: for each ``(signals, index of the right candidate)``, the softmax of
    ``signals @ w`` should pick that candidate. Newton steps with an L2 penalty towards ``prior`` (zero by
    default), halved until the loss drops."""
    import numpy as np

    dim = groups[0][0].shape[1]
    centre = np.zeros(dim) if prior is None else np.asarray(prior, np.float64)

    def loss_and_derivatives(w: Any) -> tuple[float, Any, Any]:
        off = w - centre
        loss, gradient, hessian = 0.5 * l2 * float(off @ off), l2 * off, l2 * np.eye(dim)
        for x, right in groups:
            z = x @ w
            top = z.max()
            p = np.exp(z - top)
            total = p.sum()
            p /= total
            loss += float(top + np.log(total) - z[right])
            mean = p @ x
            gradient = gradient + mean - x[right]
            hessian = hessian + (x * p[:, None]).T @ x - np.outer(mean, mean)
        return loss, gradient, hessian

    w = centre.copy()
    loss, gradient, hessian = loss_and_derivatives(w)
    for _ in range(iterations):
        step = np.linalg.solve(hessian + np.eye(dim) * 1e-9, gradient)
        scale = 1.0
        while scale > 1e-4:
            trial = w - scale * step
            trial_loss, trial_gradient, trial_hessian = loss_and_derivatives(trial)
            if trial_loss <= loss:
                break
            scale /= 2
        else:
            break
        converged = loss - trial_loss < 1e-9
        w, loss, gradient, hessian = trial, trial_loss, trial_gradient, trial_hessian
        if converged:
            break
    return [float(v) for v in w]
