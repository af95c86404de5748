"""The routing contract (seed 003 §7, DESIGN §4.6): a checkpoint of past work and a routing decision."""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from nexus._dataclass import dataclass

RouteMode = Literal["existing", "new"]
RoutingMode = Literal["explicit", "smart", "hybrid"]
ROUTING_MODES: tuple[str, ...] = ("explicit", "smart", "hybrid")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A place in past work a task can continue from: one finished turn of the ledger.

    ``segment_id`` and ``position`` are the seed's names: the ledger's segment (a run of turns that a
    fork starts anew) and the turn's depth in the tree, which together name one turn. ``session_key``
    is the session the turn was written in, ``context`` the short text the index derived from the turn
    (what was being worked on there), ``turn_id`` the turn itself and ``agent_id`` the agent that
    owned the session (``None`` when the ledger does not say).
    """

    segment_id: int
    session_key: str
    position: int
    context: str
    turn_id: str
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScoredCheckpoint:
    """A candidate with the probability the scorer gave it and the signals behind it (for ``--json``)."""

    checkpoint: Checkpoint
    probability: float
    signals: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class SmartRouteResult:
    """A routing decision: continue ``checkpoint`` (``existing``) or start afresh (``new``).

    ``confidence`` is the calibrated probability that ``checkpoint`` — the best candidate, also given
    for ``new`` when there was one — is where the task belongs; ``existing`` means it cleared the
    threshold. ``alternatives`` are the next candidates, best first. ``notes`` say what went differently
    (a task cut to the limit, the embedder failing and lexical search alone deciding), ``decision_id``
    names the ledger row that records the decision. ``decided_by`` names the embedder and the scoring
    model that made it (a model is fitted for one embedder: ``[routing] model`` says which file).
    """

    mode: RouteMode
    checkpoint: Checkpoint | None
    confidence: float
    alternatives: list[Checkpoint] = field(default_factory=list)
    scored: list[ScoredCheckpoint] = field(default_factory=list)
    threshold: float = 0.5
    notes: list[str] = field(default_factory=list)
    decision_id: str | None = None
    took_ms: float = 0.0
    decided_by: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The decision as JSON (``nexus route --json``, ``POST /v1/route``): the checkpoints, each candidate's
        probability and signals, the notes and the id of the ledger row that records it."""
        return {
            "mode": self.mode,
            "checkpoint": _checkpoint_json(self.checkpoint),
            "confidence": round(self.confidence, 4),
            "threshold": round(self.threshold, 4),
            "alternatives": [_checkpoint_json(c) for c in self.alternatives],
            "scores": [
                {"turn_id": s.checkpoint.turn_id, "probability": s.probability, "signals": s.signals}
                for s in self.scored
            ],
            "notes": list(self.notes),
            "decision_id": self.decision_id,
            "took_ms": round(self.took_ms, 2),
            "decided_by": dict(self.decided_by),
        }


def _checkpoint_json(checkpoint: Checkpoint | None) -> dict[str, object] | None:
    if checkpoint is None:
        return None
    c = checkpoint
    return {"segment_id": c.segment_id, "session_key": c.session_key, "position": c.position, "context": c.context,
            "turn_id": c.turn_id, "agent_id": c.agent_id}  # fmt: skip
