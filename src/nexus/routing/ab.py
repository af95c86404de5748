"""The A/B split between smart and explicit routing, and the comparison of the two arms.

A conversation's arm is fixed by a hash of its id (``smart`` when the hash falls below ``smart_share``),
so every message of one conversation gets the same treatment, in every process, across restarts.
:func:`compare` reads the recorded decisions and their outcomes (``DecisionLog``) and gives each arm's
count, completion rate, tokens and cost per task and share of good feedback, each with a 95 % interval:
Wilson's for rates, a normal interval of the mean for tokens and cost.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from nexus._dataclass import dataclass
from nexus.routing.store import DecisionRecord

Z95 = 1.959964


def arm_for(conversation: str, smart_share: float) -> str:
    """``smart`` or ``explicit`` for a conversation: deterministic, and ``smart`` for about ``smart_share`` of them."""
    if smart_share >= 1.0:
        return "smart"
    if smart_share <= 0.0:
        return "explicit"
    point = int.from_bytes(hashlib.sha256(conversation.encode()).digest()[:8], "big") / 2**64
    return "smart" if point < smart_share else "explicit"


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its 95 % interval (``None`` when there is nothing to estimate from)."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def show(self, digits: int = 2) -> str:
        if self.value is None or self.low is None or self.high is None:
            return "n/a"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True, slots=True)
class ArmStats:
    """One arm of the comparison."""

    arm: str
    decisions: int
    settled: int
    existing: int
    completion: Interval
    tokens: Interval
    cost: Interval
    good_feedback: Interval


def wilson(successes: int, n: int) -> Interval:
    """Wilson's 95 % interval of a rate (good at small counts and near 0 or 1)."""
    if n == 0:
        return Interval(None, None, None, 0)
    p = successes / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean with a normal 95 % interval (the sample's standard error; one value: no width), held at 0 below:
    tokens and cost are never negative, and a skewed small sample gave ``17079 [-9274, 43431]`` (a trial)."""
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return Interval(mean, max(0.0, mean - half), mean + half, n)


def compare(decisions: Sequence[DecisionRecord]) -> list[ArmStats]:
    """Per arm (``smart`` first), what its decisions led to."""
    arms = sorted({d.arm for d in decisions}, key=lambda a: (a != "smart", a))
    return [_arm(arm, [d for d in decisions if d.arm == arm]) for arm in arms]


def _arm(arm: str, rows: list[DecisionRecord]) -> ArmStats:
    settled = [d for d in rows if d.outcome_status is not None]
    rated = [d for d in rows if d.feedback is not None]
    return ArmStats(
        arm,
        len(rows),
        len(settled),
        sum(1 for d in rows if d.decision == "existing"),
        wilson(sum(1 for d in settled if d.outcome_status == "completed"), len(settled)),
        mean_interval([float(d.outcome_tokens or 0) for d in settled]),
        mean_interval([float(d.outcome_cost or 0.0) for d in settled]),
        wilson(sum(1 for d in rated if (d.feedback or 0) > 0), len(rated)),
    )
