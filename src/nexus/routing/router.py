"""``Router``: route a task to the checkpoint of past work it continues, or to a new session (stage 3).

The router owns the index of one ledger: it loads what earlier processes indexed, catches up with
turns written since (before each decision, and on a worker thread when told a turn was written), and
decides: candidates and signals (:mod:`nexus.routing._scoring`), the model's probabilities, the
calibrated confidence of the best candidate, ``existing`` above the threshold. Every decision can be
recorded in the ledger (:class:`~nexus.routing.store.DecisionLog`). All of it is synchronous and runs
off the event loop: :meth:`Router.route_async` hands it to a thread.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import field
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger import Ledger, new_ulid
from nexus.routing._index import ANY_AGENT, CheckpointIndex, Snapshot, of_agent, semantic
from nexus.routing._indexer import EmbedderGuard, Indexer
from nexus.routing._model import ScoringModel, confidence_values, load_model_file
from nexus.routing._scoring import (
    EXPAND_TOP,
    LEXICAL_LIMIT,
    SCORED,
    SEMANTIC_LIMIT,
    Candidate,
    Relevance,
    TaskTerms,
    expand,
    shortlist,
    signals,
    task_terms,
)
from nexus.routing._words import query_terms
from nexus.routing._worker import IndexWorker
from nexus.routing.embedder import Embedder, OpenAIEmbedder, WordLlamaEmbedder
from nexus.routing.errors import EmbedderError, RouteRequestError, RoutingError, UnknownRouteAgent
from nexus.routing.store import CheckpointRow, DecisionRecord
from nexus.routing.types import Checkpoint, RouteMode, ScoredCheckpoint, SmartRouteResult

MAX_TASK_CHARS = 4000
MAX_LIMIT = 50


@dataclass(frozen=True, slots=True)
class RouteSettings:
    """``[routing]`` in nexus.toml (see docs/routing.md)."""

    embedder: str = "wordllama"  # wordllama | openai | none
    embedding_base_url: str = ""
    embedding_model: str = ""
    embedding_api_key_env: str = "OPENAI_API_KEY"
    threshold: float | None = None  # None: the fitted model's
    max_task_chars: int = MAX_TASK_CHARS
    poll_s: float = 2.0
    model_path: str = ""  # "": the shipped model; else a JSON file of the same shape (fitted for another embedder)


def make_embedder(settings: RouteSettings) -> Embedder | None:
    """The embedder the settings name (``none``: lexical search alone)."""
    import os

    if settings.embedder == "wordllama":
        return WordLlamaEmbedder()
    if settings.embedder == "openai":
        key = os.environ.get(settings.embedding_api_key_env) if settings.embedding_api_key_env else None
        return OpenAIEmbedder(settings.embedding_base_url, settings.embedding_model, api_key=key or "")
    if settings.embedder == "none":
        return None
    raise RoutingError(f"[routing] embedder = {settings.embedder!r} is not known; use wordllama, openai or none")


@dataclass(slots=True)
class _Task:
    text: str
    notes: list[str] = field(default_factory=list)
    vector: Any = None  # the task's embedding, once asked for (None: none, or not yet)
    embedded: bool = False


class Router:
    """Smart routing over one ledger: the checkpoint index, decisions, and their record."""

    def __init__(
        self,
        ledger: Ledger,
        settings: RouteSettings | None = None,
        *,
        embedder: Embedder | str | None = "settings",
        model: ScoringModel | None = None,
    ) -> None:
        from nexus.routing._backend import open_route_store

        self.ledger = ledger
        self.settings = settings or RouteSettings()
        chosen = make_embedder(self.settings) if isinstance(embedder, str) else embedder
        self.guard = EmbedderGuard(chosen)
        self.model = model or load_model_file(self.settings.model_path)
        self.store = open_route_store(ledger)
        self.decisions = self.store
        self.index = CheckpointIndex(self._dimension())
        self.indexer = Indexer(ledger, self.store, self.index, self.guard)
        self.indexer.load()
        self._worker: IndexWorker | None = None

    def _dimension(self) -> int:
        embedder = self.guard.embedder
        if embedder is None:
            return 0
        if embedder.dim:
            return embedder.dim
        probe = self.guard.embed(["dimension probe"])  # an OpenAI-compatible server says it by answering
        return len(probe[0]) // 4 if probe else 0

    def decided_by(self) -> dict[str, str]:
        """Which embedder and scoring model decide here (``nexus route`` prints them beside each decision)."""
        embedder = self.guard.embedder
        return {
            "embedder": embedder.name if embedder is not None else "none (lexical search only)",
            "model": self.settings.model_path or "shipped (nexus/routing/model.json)",
            "fitted_on": self.model.fitted_on,
        }

    @property
    def threshold(self) -> float:
        return self.settings.threshold if self.settings.threshold is not None else self.model.threshold

    # ------------------------------------------------------------------ indexing

    def catch_up(self, limit: int | None = None) -> int:
        """Index the turns written since the last catch-up (blocking: call it off the event loop)."""
        return self.indexer.catch_up(limit)

    def start(self) -> None:
        """Start the worker thread that indexes new turns (woken by :meth:`notify`, else every ``poll_s``)."""
        if self._worker is None:
            self._worker = IndexWorker(self.indexer.catch_up, self.settings.poll_s)
            self._worker.start()

    def notify(self) -> None:
        """A turn was written: the worker indexes it soon (cheap; safe to call from the event loop)."""
        if self._worker is not None:
            self._worker.wake()

    def reindex(self) -> int:
        """Forget the index and build it again from every closed turn; returns the checkpoints made.

        Files are stamped as they are now: freshness counts changes from this moment on.
        """
        with self.indexer._lock:
            self.store.clear()
            self.index = CheckpointIndex(self.index.dim)
            self.indexer.index = self.index
        return self.catch_up()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker and close the store's connection (the ledger stays open)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self.store.close()

    # ------------------------------------------------------------------ deciding

    async def route_async(self, task: str, **kwargs: object) -> SmartRouteResult:
        """:meth:`route` on a worker thread (the event loop never waits for a decision)."""
        return await asyncio.to_thread(lambda: self.route(task, **kwargs))  # type: ignore[arg-type]

    def route(
        self,
        task: str,
        *,
        agent: str | None = None,
        limit: int = 5,
        record: bool = True,
        catch_up: bool = True,
        routing_mode: str = "smart",
        arm: str = "smart",
        conversation_id: str | None = None,
        now_ms: int | None = None,
        agents_only: bool = False,
    ) -> SmartRouteResult:
        """Where ``task`` belongs: the best checkpoint and whether to continue it (``existing``) or start ``new``.

        ``agent=None`` looks at every session's past work; with ``agents_only``, at the sessions some agent
        talks in (a message sent without an agent is continued by the agent of the checkpoint: a
        ``nexus run`` session or an imported one has none)."""
        started = time.perf_counter()
        checked = self._check(task, agent, limit)
        if catch_up:
            self.catch_up()
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        result = self._decide(checked, agent, limit, now, agents_only)
        result.took_ms = (time.perf_counter() - started) * 1000
        result.decided_by = self.decided_by()
        if record:
            result.decision_id = self._record(checked.text, agent, result, routing_mode, arm, conversation_id)
        return result

    def _check(self, task: str, agent: str | None, limit: int) -> _Task:
        if isinstance(task, str) and "\x00" in task:
            # a NUL reads as white space, as in the index of past turns: PostgreSQL's text (the decision's
            # record) cannot hold it, and a message's content may carry one (the doors take it, JSON-escaped)
            task = task.replace("\x00", " ")
        if not isinstance(task, str) or not task.strip():
            raise RouteRequestError('the task is empty; say what should be done (e.g. "fix the login test")')
        bad = next((i for i, ch in enumerate(task) if "\ud800" <= ch <= "\udfff"), None)
        if bad is not None:  # it would fail the embedder (off for a minute for everyone) and SQLite's encoding
            raise RouteRequestError(
                f"the task is not valid Unicode (a lone surrogate at character {bad}: bytes that were not UTF-8); "
                "send it as UTF-8 text"
            )
        if not 1 <= limit <= MAX_LIMIT:
            raise RouteRequestError(f"limit is {limit}; give 1 to {MAX_LIMIT} alternatives")
        if agent is not None and agent not in self.store.known_agents():
            known = ", ".join(self.store.known_agents()) or "none registered"
            raise UnknownRouteAgent(f"unknown agent {agent!r}; known agents: {known}")
        text = task.strip()
        checked = _Task(text)
        if len(text) > self.settings.max_task_chars:
            checked.text = text[: self.settings.max_task_chars]
            checked.notes.append(
                f"the task is {len(text)} characters; routed on its first {self.settings.max_task_chars}"
            )
        return checked

    def candidates(
        self, task: str, *, agent: str | None = None, now_ms: int | None = None
    ) -> tuple[list[Candidate], object]:
        """The candidates of ``task`` and their signal matrix, unscored (for fitting the model and for tests)."""
        checked = self._check(task, agent, 1)
        snap = self.index.snapshot()
        code = self.index.agent_code(agent) if agent is not None else None
        terms = self._terms(checked.text, snap)
        found, relevance = self._candidates(checked, terms, snap, code)
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        return found, signals(found, relevance, terms, now)

    def _terms(self, text: str, snap: Snapshot) -> TaskTerms:
        terms = query_terms(text)
        frequencies, total = self.index.postings.frequencies(terms) if terms else ({}, 0)
        return task_terms(terms, frequencies, min(total, snap.n))

    def _decide(self, task: _Task, agent: str | None, limit: int, now_ms: int, agents_only: bool) -> SmartRouteResult:
        snap = self.index.snapshot()
        code = self.index.agent_code(agent) if agent is not None else ANY_AGENT if agents_only else None
        if snap.n == 0 or code == -2:
            notes = [*task.notes, "no past work to route to" + (f" for agent {agent!r}" if agent else "")]
            return SmartRouteResult("new", None, 0.0, threshold=self.threshold, notes=notes)
        terms = self._terms(task.text, snap)
        candidates, relevance = self._candidates(task, terms, snap, code)
        if not candidates:
            notes = [*task.notes, "nothing in past work matches the task"]
            return SmartRouteResult("new", None, 0.0, threshold=self.threshold, notes=notes)
        matrix = signals(candidates, relevance, terms, now_ms)
        scores = self.model.scores(matrix)
        shares = self.model.shares(scores)
        order = sorted(range(len(candidates)), key=lambda i: -float(scores[i]))
        if code is None:
            confidence = self.model.confidence(confidence_values(matrix, scores, shares, order))
        else:
            confidence = self._confidence_over_all(task, terms, snap, now_ms, candidates[order[0]])
        scored = [_scored(candidates[i], float(shares[i]), matrix[i]) for i in order[: limit + 1]]
        mode: RouteMode = "existing" if confidence >= self.threshold else "new"
        return SmartRouteResult(
            mode,
            scored[0].checkpoint,
            confidence,
            [s.checkpoint for s in scored[1 : limit + 1]],
            scored[: limit + 1],
            self.threshold,
            task.notes,
        )

    def _confidence_over_all(
        self, task: _Task, terms: TaskTerms, snap: Snapshot, now_ms: int, chosen: Candidate
    ) -> float:
        """The confidence in ``chosen``, the best of one agent's work, measured against all past work.

        What the calibration reads — the chosen one's share and lead, its score — is relative to the candidates
        beside it. Among one agent's few checkpoints the best has a large share and lead whether it fits or not:
        one rare word in common with one of three came out at 0.95, and a checkpoint at 0.00 among everyone's
        work at 0.62 once the task's real home (another agent's session) was out of scope. Ranked among all past
        work instead (with the chosen one added if it is not among those candidates), its confidence is what it
        would be if it won there, lower when something out of scope fits better, and never higher for a
        narrower scope."""
        everyone, relevance = self._candidates(task, terms, snap, None)
        at = next((i for i, c in enumerate(everyone) if c.row == chosen.row), None)
        if at is None:  # not among the best of all past work: compared with them as what it is
            at = len(everyone)
            everyone.append(Candidate(chosen.row, chosen.stored, cos=chosen.cos, lex=chosen.lex))
            if chosen.lex > 0:
                relevance.lex_by_row[chosen.row] = chosen.lex
        matrix = signals(everyone, relevance, terms, now_ms)
        scores = self.model.scores(matrix)
        rest = sorted((i for i in range(len(everyone)) if i != at), key=lambda i: -float(scores[i]))
        return self.model.confidence(confidence_values(matrix, scores, self.model.shares(scores), [at, *rest]))

    def _candidates(
        self, task: _Task, terms: TaskTerms, snap: Snapshot, code: int | None
    ) -> tuple[list[Candidate], Relevance]:
        """Stage 1: lexical hits, nearest vectors, and the turns around the best of them (of ``code``'s agent)."""
        vector = self._embed_task(task)
        relevance = Relevance(snap, vector, {}, 0.0)
        if snap.n == 0 or code == -2:
            return [], relevance
        found: dict[int, Candidate] = {}
        if terms.searched:
            limit = LEXICAL_LIMIT * (4 if code is not None else 1)
            for row, score in self.index.postings.search(terms.searched, limit, rows_below=snap.n):
                if code is not None and not of_agent(code, int(snap.agents[row])):
                    continue
                found[row] = Candidate(row, _EMPTY, lex=score, lex_rank=len(found) + 1)
                relevance.lex_by_row[row] = score
                if len(found) >= LEXICAL_LIMIT:
                    break
            relevance.best_lex = max(relevance.lex_by_row.values(), default=0.0)
        if vector is not None:
            for rank, (row, _cos) in enumerate(semantic(snap, vector, SEMANTIC_LIMIT, code), start=1):
                found.setdefault(row, Candidate(row, _EMPTY)).sem_rank = rank
        expand(found, relevance, EXPAND_TOP)
        rows = [r for r in found if code is None or of_agent(code, int(snap.agents[r]))]
        found = {r: found[r] for r in shortlist(rows, relevance, SCORED)}
        for candidate in found.values():
            candidate.lex = relevance.lex_by_row.get(candidate.row, 0.0)
            if vector is not None:
                candidate.cos = float(snap.vectors[candidate.row] @ vector)
        stored = {r.id: r for r in self.store.rows([int(snap.ids[row]) for row in found])}
        out = []
        for candidate in found.values():
            record = stored.get(int(snap.ids[candidate.row]))
            if record is not None:
                candidate.stored = record
                out.append(candidate)
        return out, relevance

    def _embed_task(self, task: _Task) -> Any:
        if task.embedded:
            return task.vector
        task.embedded = True
        if self.guard.embedder is None or self.index.dim == 0:
            return None
        vectors = self.guard.embed([task.text])
        if vectors is None:
            task.notes.append(f"the embedder failed ({self.guard.failure}); ranked by lexical search alone")
            return None
        import numpy as np

        task.vector = np.frombuffer(vectors[0], np.float32)
        return task.vector

    def _record(
        self, task: str, agent: str | None, result: SmartRouteResult, mode: str, arm: str, conversation: str | None
    ) -> str:
        decision_id = new_ulid()
        chosen = result.checkpoint.turn_id if result.checkpoint is not None and result.mode == "existing" else None
        self.decisions.record(
            DecisionRecord(
                decision_id,
                int(time.time() * 1000),
                task,
                agent,
                conversation,
                mode,
                arm,
                result.mode,
                chosen,
                result.confidence,
                [c.turn_id for c in ([result.checkpoint] if result.checkpoint else []) + result.alternatives],
                self.guard.name,
                result.took_ms,
            )
        )
        return decision_id


_EMPTY = CheckpointRow(0, "", "", None, 0, 0, "", 0.0, 0, "", ())


def _scored(candidate: Candidate, probability: float, row: object) -> ScoredCheckpoint:
    from nexus.routing._model import FEATURES

    s = candidate.stored
    checkpoint = Checkpoint(s.segment_id, s.session_label, s.position, s.context, s.turn_id, s.agent_id)
    values = [round(float(v), 4) for v in row]  # type: ignore[attr-defined]
    return ScoredCheckpoint(checkpoint, round(probability, 4), dict(zip(FEATURES, values, strict=True)))


__all__ = ["EmbedderError", "RouteSettings", "Router", "make_embedder"]
