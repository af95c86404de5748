"""The in-memory side of the checkpoint index: vectors and the few facts the scorer needs per checkpoint.

Everything else (texts, files, session) stays in the store and is read only for the candidates of a
decision, so memory is about ``dim * 4`` bytes per checkpoint plus ~60 bytes of arrays and a map entry
(docs/routing.md has the measured figure). Semantic search is a brute-force matrix-vector product over
the normalized vectors: measured against sqlite-vec's ``vec0`` at 10k and 100k checkpoints
(``bench/bench_routing.py --vec``) it was the faster of the two, and it needs no extension.

Appends take a lock and grow the arrays by doubling; a reader takes a snapshot (the arrays and the
count) and never sees a half-added row.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from nexus._dataclass import dataclass
from nexus.routing._lexical import Postings
from nexus.routing.store import CheckpointMeta

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The index as one reader sees it: ``n`` rows of parallel arrays."""

    n: int
    ids: Any  # int64 checkpoint ids
    vectors: Any  # float32 (n, dim), zero rows where no vector
    coarse: Any  # float32 (n, COARSE_DIM): the vectors' first dimensions, normalized, contiguous
    agents: Any  # int32 agent codes (-1: none)
    segments: Any  # int64
    positions: Any  # int64
    completed: Any  # int64 ms
    quality: Any  # float32
    links: Any  # float32: how closely each continues its parent's work
    parents: Any  # int32 row of the parent checkpoint (-1: none indexed)
    children: dict[int, list[int]]
    with_vectors: int


class CheckpointIndex:
    """Vectors and per-checkpoint facts, appended as the store grows; safe for one writer and many readers."""

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self._lock = threading.Lock()
        self._n = 0
        self._cap = 0
        self._np = np
        self._ids = np.zeros(0, np.int64)
        self._vectors = np.zeros((0, dim), np.float32)
        self._coarse_dim = min(dim, COARSE_DIM)
        self._coarse = np.zeros((0, self._coarse_dim), np.float32)
        self._agents = np.zeros(0, np.int32)
        self._segments = np.zeros(0, np.int64)
        self._positions = np.zeros(0, np.int64)
        self._completed = np.zeros(0, np.int64)
        self._quality = np.zeros(0, np.float32)
        self._links = np.zeros(0, np.float32)
        self._parents = np.zeros(0, np.int32)
        self._row_of_turn: dict[str, int] = {}
        self._row_of_id: dict[int, int] = {}
        self._children: dict[int, list[int]] = {}
        self._agent_codes: dict[str, int] = {}
        self._with_vectors = 0
        self.last_id = 0
        self.postings = Postings()

    def __len__(self) -> int:
        return self._n

    @property
    def with_vectors(self) -> int:
        """How many of the checkpoints have a vector."""
        return self._with_vectors

    def agent_code(self, agent: str | None) -> int:
        """The code of an agent id in :attr:`Snapshot.agents` (-2 for one the index has never seen)."""
        if agent is None:
            return -1
        return self._agent_codes.get(agent, -2)

    def row_of(self, checkpoint_id: int) -> int | None:
        return self._row_of_id.get(checkpoint_id)

    def _grow(self, needed: int) -> None:
        np = self._np
        cap = max(1024, self._cap)
        while cap < needed:
            cap *= 2
        if cap == self._cap:
            return

        def grown(old: Any, shape: tuple[int, ...], dtype: Any) -> Any:
            new = np.zeros(shape, dtype)
            new[: self._n] = old[: self._n]
            return new

        self._ids = grown(self._ids, (cap,), np.int64)
        self._vectors = grown(self._vectors, (cap, self.dim), np.float32)
        self._coarse = grown(self._coarse, (cap, self._coarse_dim), np.float32)
        self._agents = grown(self._agents, (cap,), np.int32)
        self._segments = grown(self._segments, (cap,), np.int64)
        self._positions = grown(self._positions, (cap,), np.int64)
        self._completed = grown(self._completed, (cap,), np.int64)
        self._quality = grown(self._quality, (cap,), np.float32)
        self._links = grown(self._links, (cap,), np.float32)
        self._parents = grown(self._parents, (cap,), np.int32)
        self._cap = cap

    def add(self, metas: list[CheckpointMeta]) -> None:
        """Append checkpoints (in id order; ids already present are ignored)."""
        with self._lock:
            self._grow(self._n + len(metas))
            for meta in metas:
                if meta.id not in self._row_of_id:
                    self._add_one(meta)

    def _add_one(self, meta: CheckpointMeta) -> None:
        row = self._n
        self._ids[row] = meta.id
        if meta.vector is not None and len(meta.vector) == self.dim * 4:
            self._put_vector(row, meta.vector)
            self._with_vectors += 1
        code = -1 if meta.agent_id is None else self._agent_codes.setdefault(meta.agent_id, len(self._agent_codes))
        self._agents[row] = code
        self._segments[row] = meta.segment_id
        self._positions[row] = meta.position
        self._completed[row] = meta.completed_at
        self._quality[row] = meta.quality
        self._links[row] = meta.link
        parent = self._row_of_turn.get(meta.parent_turn_id) if meta.parent_turn_id else None
        self._parents[row] = -1 if parent is None else parent
        if parent is not None:
            self._children.setdefault(parent, []).append(row)
        self._row_of_turn[meta.turn_id] = row
        self._row_of_id[meta.id] = row
        self.postings.add(row, meta.columns)
        self.last_id = max(self.last_id, meta.id)
        self._n = row + 1

    def _put_vector(self, row: int, blob: bytes) -> None:
        vector = self._np.frombuffer(blob, self._np.float32)
        self._vectors[row] = vector
        prefix = vector[: self._coarse_dim]
        norm = float(self._np.linalg.norm(prefix))
        self._coarse[row] = prefix / norm if norm else prefix

    def vector_of(self, turn_id: str) -> bytes | None:
        """The stored vector of an indexed turn (``None`` when not indexed or without one)."""
        row = self._row_of_turn.get(turn_id)
        if row is None or not self._vectors[row].any():
            return None
        return bytes(self._vectors[row].tobytes())

    def set_vectors(self, rows: list[tuple[int, bytes]]) -> None:
        """Fill vectors of checkpoints added without one (an embedder that failed, then recovered)."""
        with self._lock:
            for checkpoint_id, blob in rows:
                row = self._row_of_id.get(checkpoint_id)
                if row is not None and len(blob) == self.dim * 4:
                    if not self._vectors[row].any():
                        self._with_vectors += 1
                    self._put_vector(row, blob)

    def _arrays(self) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any, Any]:
        """The per-checkpoint arrays, in :class:`Snapshot`'s order."""
        return (
            self._ids,
            self._vectors,
            self._coarse,
            self._agents,
            self._segments,
            self._positions,
            self._completed,
            self._quality,
            self._links,
            self._parents,
        )

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._n, *self._arrays(), self._children, self._with_vectors)

    def memory_bytes(self) -> int:
        """Bytes this index's checkpoints take (their rows of the arrays, and an estimate of the maps; the arrays
        grow by doubling, so up to twice the rows' bytes may be allocated)."""
        arrays = self._arrays()
        # dict entries, boxed ints and turn id strings of the two maps; a child list per parent
        maps = 2 * 104 * self._n + 75 * len(self._row_of_turn) + 88 * len(self._children)
        per_row = sum(int(a.itemsize) * int(self._np.prod(a.shape[1:])) for a in arrays)
        return int(per_row * self._n) + maps + self.postings.memory_bytes()


ANY_AGENT = -3
"""The agent code that selects the checkpoints of every agent (not those of sessions no agent owns)."""


def of_agent(code: int, row_code: int) -> bool:
    """Whether a checkpoint whose agent code is ``row_code`` belongs to ``code`` (an agent, or :data:`ANY_AGENT`)."""
    return row_code == code or (code == ANY_AGENT and row_code >= 0)


def _agent_mask(agents: Any, code: int) -> Any:
    return agents >= 0 if code == ANY_AGENT else agents == code


def semantic(snap: Snapshot, query: npt.NDArray[np.float32], k: int, agent: int | None) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to ``query`` (unit vector), as ``(row, cosine)`` best first."""
    import numpy as np

    if snap.n == 0 or snap.with_vectors == 0:
        return []
    # einsum, not ``@``: BLAS hands a matrix-vector product to its threads, and on a busy machine waking them
    # cost 5-15 ms at 10,000 rows (measured) where one core takes 0.5 ms
    rows = _coarse_rows(snap, query, k, agent) if snap.n > COARSE_FROM and snap.vectors.shape[1] > COARSE_DIM else None
    vectors = snap.vectors[: snap.n] if rows is None else snap.vectors[rows]
    sims = np.einsum("ij,j->i", vectors, query)
    if agent is not None:
        agents = snap.agents[: snap.n] if rows is None else snap.agents[rows]
        sims = np.where(_agent_mask(agents, agent), sims, -2.0)
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top])]
    found = top if rows is None else rows[top]
    return [(int(r), float(s)) for r, s in zip(found, sims[top], strict=True) if s > -2.0]


COARSE_FROM = 20_000
COARSE_DIM = 128
COARSE_POOL = 1_000
"""Above 20,000 checkpoints the nearest vectors are found in two steps: the first 128 dimensions of every
vector, normalized and kept contiguous (wordllama's embeddings are trained to be truncated), pick 1,000
rows and the full vectors rank those. At 100,000 rows the first step read 3.8 ms where the whole matrix
took 9.5 ms (a strided view of the prefixes took 17.7: einsum leaves its fast path); on the
10,000-checkpoint bench ledger it kept 99 % of the exact top 30 (600 rows picked). The prefixes cost
512 bytes per checkpoint."""


def _coarse_rows(snap: Snapshot, query: npt.NDArray[np.float32], k: int, agent: int | None) -> Any:
    import numpy as np

    prefix = query[:COARSE_DIM]
    norm = float(np.linalg.norm(prefix)) or 1.0
    sims = np.einsum("ij,j->i", snap.coarse[: snap.n], prefix / norm)
    if agent is not None:
        sims = np.where(_agent_mask(snap.agents[: snap.n], agent), sims, -2.0)
    pool = min(snap.n, max(COARSE_POOL, 20 * k))
    return np.argpartition(-sims, pool - 1)[:pool]


def ancestors(snap: Snapshot, row: int, depth: int) -> list[int]:
    """The checkpoint's parent, grandparent, ... (at most ``depth``), nearest first."""
    out: list[int] = []
    parent = int(snap.parents[row])
    while parent >= 0 and len(out) < depth:
        out.append(parent)
        parent = int(snap.parents[parent])
    return out


def descendants(snap: Snapshot, row: int, depth: int) -> list[tuple[int, int]]:
    """``(row, distance)`` of the checkpoints below this one, at most ``depth`` levels down."""
    out: list[tuple[int, int]] = []
    level = [row]
    for distance in range(1, depth + 1):
        level = [child for r in level for child in snap.children.get(r, ()) if child < snap.n]
        out += [(child, distance) for child in level]
    return out
