"""Stages 1 and 2 of a decision: candidates (lexical + semantic), then the signals the model scores.

Candidates are the union of the best BM25 hits (FTS5 over the checkpoint texts) and the nearest
vectors; reciprocal-rank fusion of the two lists is one signal among the others:

- ``cos``, ``cos_gap``: cosine to the task, and its distance to the best candidate's;
- ``lex``, ``lex_abs``, ``coverage``: BM25 relative to the best hit, per query term, and relative to a
  checkpoint that held every term of the task (how strong the match is at all);
- ``unknown``: the share of the task's words (by idf) that no checkpoint holds — work nobody did yet;
- ``rrf``: the fused rank; ``facet``: words of the task that name the checkpoint's files;
- ``quality``: completed cleanly (1), with tool errors (0.7), failed or aborted (0);
- ``own``, ``carried``, ``continues``, ``context``, ``superseded``: thread continuity. Each turn has a ``link`` to
  its parent (how closely it continues the parent's work: similar text, same files). ``carried`` is an
  ancestor's match passed down through the links (a terse follow-up inherits the work it continues),
  ``continues`` the strongest chain of links below the turn (the same work went on after it, so a later turn
  supersedes it), ``context`` = max(own, carried) and ``superseded`` = continues * context;
- ``fresh``: the share of its files unchanged on disk; ``recency``: ``exp(-age / 30 days)``.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from nexus._dataclass import dataclass
from nexus.routing._files import freshness
from nexus.routing._index import Snapshot, ancestors, descendants
from nexus.routing._model import FEATURES
from nexus.routing._words import stem, words
from nexus.routing.store import CheckpointRow

RRF_K = 10
LEXICAL_LIMIT = 30
SEMANTIC_LIMIT = 30
POSTINGS_BUDGET = 6000
"""How many (term, checkpoint) postings a lexical search may read: the task's terms are taken rarest first
until the next would pass it. A word many checkpoints hold adds next to nothing to BM25 but costs a long
posting list; without the budget a decision at 100,000 checkpoints spent most of its time there."""
SCORED = 24
"""Candidates that get every signal (file freshness, facets, the stored row): the best by match or by the
match their thread carries; the rest cannot win."""
RECENCY_DAYS = 30.0
THREAD_DECAY = 0.85
THREAD_DEPTH = 3
EXPAND_TOP = 10
DAY_MS = 86_400_000
ASK_SATURATION = 1.7
"""BM25 of one query term matched once in a request of average length (FTS5: k1 = 1.2, b = 0.75, the
request column weighted 4): what a checkpoint that holds every term of the task would score per idf."""

_GENERIC_WORDS = (
    "py ts tsx js jsx sql md yaml yml json html txt toml cfg ini sh src lib app tests test spec docs doc "
    "index main init mod util utils www public templates template"
)
_GENERIC_PATH = frozenset(stem(w) for w in _GENERIC_WORDS.split())


def _path_words(paths: list[str]) -> set[str]:
    return {w for w in words(" ".join(paths)) if len(w) > 2 and w not in _GENERIC_PATH}


@dataclass(frozen=True, slots=True)
class TaskTerms:
    """A task's search terms with what the index knows of them."""

    terms: list[str]
    ideal: float  # BM25 of a checkpoint holding every known term once
    unknown: float  # the idf-weighted share of the terms no checkpoint holds
    searched: list[str]  # the terms the lexical search uses: the rarest known ones


def task_terms(terms: list[str], frequencies: dict[str, int], total: int) -> TaskTerms:
    """Idf of each term as FTS5 computes it; a term in no checkpoint counts with the highest idf."""
    n = max(1, total)
    top = math.log((n + 0.5) / 0.5)
    known = sum(max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) for t, df in frequencies.items() if t in terms)
    missing = sum(top for t in terms if t not in frequencies)
    rare = sorted((t for t in terms if t in frequencies), key=lambda t: frequencies[t])
    searched: list[str] = []
    budget = POSTINGS_BUDGET
    for term in rare:
        if frequencies[term] > budget and searched:
            break
        searched.append(term)
        budget -= frequencies[term]
    unknown = missing / (known + missing) if known + missing else 1.0
    return TaskTerms(terms, known * ASK_SATURATION, unknown, searched)


@dataclass(slots=True)
class Candidate:
    """One candidate of a decision: its index row, stored row, and signals."""

    row: int
    stored: CheckpointRow
    cos: float = 0.0
    lex: float = 0.0
    lex_rank: int = 0  # 0: not a lexical hit
    sem_rank: int = 0  # 0: not a semantic hit


@dataclass(slots=True)
class Relevance:
    """How well any checkpoint matches the task on its own: cosine (any row) and BM25 (the lexical hits)."""

    snap: Snapshot
    vector: Any  # unit task vector, or None
    lex_by_row: dict[int, float]
    best_lex: float
    _known: dict[int, float] = field(default_factory=dict)

    def own(self, row: int) -> float:
        found = self._known.get(row)
        if found is None:
            cos = float(self.snap.vectors[row] @ self.vector) if self.vector is not None else 0.0
            lex = self.lex_by_row.get(row, 0.0) / self.best_lex if self.best_lex > 0 else 0.0
            found = self._known[row] = 0.5 * cos + 0.5 * lex
        return found


def expand(candidates: dict[int, Candidate], relevance: Relevance, top: int) -> None:
    """Add the turns around the best candidates: descendants (a later turn of the same work may be terse and
    not found by itself) and ancestors (the work a found turn continues)."""
    best = sorted(candidates, key=relevance.own, reverse=True)[:top]
    for row in best:
        around = [r for r, _ in descendants(relevance.snap, row, THREAD_DEPTH)] + ancestors(relevance.snap, row, 2)
        for other in around:
            candidates.setdefault(other, Candidate(other, candidates[row].stored))


def shortlist(rows: list[int], relevance: Relevance, keep: int) -> list[int]:
    """The ``keep`` rows with the best match of their own or carried down their thread."""
    return sorted(rows, key=lambda r: -max(relevance.own(r), _carried(relevance.snap, relevance, r)))[:keep]


def _carried(snap: Snapshot, relevance: Relevance, row: int) -> float:
    """How much of an ancestor's match reaches this turn through the links of the turns between (a turn
    that continues the matching work carries it; the first turn of other work does not)."""
    best, strength, current = 0.0, 1.0, row
    for ancestor in ancestors(snap, row, THREAD_DEPTH):
        strength *= float(snap.links[current])
        best = max(best, relevance.own(ancestor) * strength)
        current = ancestor
    return best


def _continues(snap: Snapshot, row: int) -> float:
    """How strongly the work of this turn goes on below it (the strongest chain of links to a descendant)."""
    best = 0.0
    level = [(row, 1.0)]
    for _ in range(THREAD_DEPTH):
        level = [
            (child, strength * float(snap.links[child]))
            for r, strength in level
            for child in snap.children.get(r, ())
            if child < snap.n
        ]
        best = max([best, *(strength for _, strength in level)])
    return best


def signals(candidates: list[Candidate], relevance: Relevance, task: TaskTerms, now_ms: int) -> Any:
    """The ``(k, len(FEATURES))`` signal matrix of the candidates (order kept)."""
    import numpy as np

    snap = relevance.snap
    best_cos = max((c.cos for c in candidates), default=0.0)
    best_lex = relevance.best_lex
    task_stems = set(task.terms)
    n_terms = max(1, len(task.terms))
    out = np.zeros((len(candidates), len(FEATURES)), np.float64)
    for i, c in enumerate(candidates):
        rrf = (1.0 / (RRF_K + c.lex_rank) if c.lex_rank else 0.0) + (1.0 / (RRF_K + c.sem_rank) if c.sem_rank else 0.0)
        facet_hits = len(_path_words([f.name for f in c.stored.files]) & task_stems)
        age_days = max(0.0, (now_ms - c.stored.completed_at) / DAY_MS)
        own = relevance.own(c.row)
        carried, continues = _carried(snap, relevance, c.row), _continues(snap, c.row)
        out[i] = (
            c.cos,
            c.cos - best_cos,
            c.lex / best_lex if best_lex > 0 else 0.0,
            (c.lex / n_terms) / (1.0 + c.lex / n_terms),
            min(1.0, c.lex / task.ideal) if task.ideal > 0 else 0.0,
            task.unknown,
            rrf * RRF_K / 2.0,
            min(facet_hits, 3) / 3.0,
            c.stored.quality,
            own,
            carried,
            continues,
            max(own, carried),
            continues * max(own, carried),
            freshness(c.stored.files),
            math.exp(-age_days / RECENCY_DAYS),
        )
    return out
