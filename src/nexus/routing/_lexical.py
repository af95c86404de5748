"""BM25 over the checkpoints' words, in memory: the lexical stage of a decision on every backend.

A decision used to ask SQLite's FTS5 (``bm25()`` over ``route_fts``) and its vocabulary table: about
3 ms of a 7 ms decision at 10,000 checkpoints, most of it FTS5 scoring rows one by one, and it had no
PostgreSQL equivalent that scores the same. Here the postings (per term: the rows that hold it and its
column-weighted count there) sit in compact arrays and a search scores only the terms the task searches
(at most ``POSTINGS_BUDGET`` postings), vectorized. The formula is FTS5's, so the scores, and the model
fitted on them, are unchanged: for each term, ``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))``
with ``idf = ln((N - df + 0.5) / (df + 0.5))`` (``1e-6`` when not positive), ``f`` the term's count in
the row weighted by column (request 4, reply 1.5, file names 2.5), ``len`` the row's words in all columns.

The words come from the store: SQLite reads them back out of its FTS5 index (the table stays, written as
before), PostgreSQL keeps them in a column. Appends take a lock; a search copies the few postings it
reads under it, so it never sees a half-added row.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

K1 = 1.2
B = 0.75
COLUMN_WEIGHTS = (4.0, 1.5, 2.5)
"""The weight of a word in the request, the reply and the file names (the columns of ``route_fts``)."""


class Postings:
    """Per term, the rows that hold it and its weighted count in each; per row, its length in words."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, array[int]] = {}
        self._counts: dict[str, array[float]] = {}
        self._lengths = array("f")
        self._total_words = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, row: int, columns: Sequence[str]) -> None:
        """Add a row's words (one space-separated text per column, as ``index_text`` makes them).

        Rows come in order: ``row`` is the next one (a row already added is ignored)."""
        weighted: dict[str, float] = {}
        length = 0
        for weight, text in zip(COLUMN_WEIGHTS, columns, strict=False):
            tokens = text.split()
            length += len(tokens)
            for token, count in Counter(tokens).items():
                weighted[token] = weighted.get(token, 0.0) + weight * count
        with self._lock:
            if row != len(self._lengths):
                return
            for token, weight_sum in weighted.items():
                rows = self._rows.get(token)
                if rows is None:
                    rows = self._rows[token] = array("i")
                    self._counts[token] = array("f")
                rows.append(row)
                self._counts[token].append(weight_sum)
            self._lengths.append(float(length))
            self._total_words += length

    def frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many rows hold each term (terms in none are left out), and how many rows there are."""
        with self._lock:
            found = {t: len(self._rows[t]) for t in terms if t in self._rows}
            return found, len(self._lengths)

    def search(self, terms: Sequence[str], limit: int, rows_below: int | None = None) -> list[tuple[int, float]]:
        """The ``limit`` best rows for any of ``terms`` by BM25, as ``(row, score)`` best first."""
        import numpy as np

        with self._lock:
            n = len(self._lengths)
            if n == 0:
                return []
            average = self._total_words / n or 1.0
            lists = [
                (np.array(self._rows[t], np.int64), np.array(self._counts[t], np.float64))
                for t in dict.fromkeys(terms)
                if t in self._rows
            ]
            lengths = np.frombuffer(self._lengths, np.float32)[:n].astype(np.float64)
        if not lists:
            return []
        hit_rows = np.concatenate([r for r, _ in lists])
        parts = []
        for rows, counts in lists:
            idf = math.log((n - len(rows) + 0.5) / (len(rows) + 0.5))
            idf = idf if idf > 0 else 1e-6
            norm = K1 * (1 - B + B * lengths[rows] / average)
            parts.append(idf * counts * (K1 + 1) / (counts + norm))
        unique, where = np.unique(hit_rows, return_inverse=True)
        scores = np.bincount(where, weights=np.concatenate(parts), minlength=len(unique))
        if rows_below is not None:
            keep = unique < rows_below
            unique, scores = unique[keep], scores[keep]
        k = min(limit, len(unique))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(unique) else np.arange(len(unique))
        top = top[np.lexsort((unique[top], -scores[top]))]
        return [(int(unique[i]), float(scores[i])) for i in top]

    def memory_bytes(self) -> int:
        """Bytes of the postings and lengths (arrays; the term map's entries estimated at 150 bytes each)."""
        with self._lock:
            arrays = sum(a.itemsize * len(a) for a in self._rows.values())
            arrays += sum(a.itemsize * len(a) for a in self._counts.values())
            return arrays + 4 * len(self._lengths) + 150 * len(self._rows)


def columns_of(ask: str, reply: str, files: str) -> tuple[str, str, str]:
    """A checkpoint's three columns as the index holds them (stemmed words, space-separated)."""
    from nexus.routing._words import index_text

    return index_text(ask), index_text(reply), index_text(files)


def rows_from_instances(instances: Any) -> dict[int, tuple[str, str, str]]:
    """Rebuild each row's columns from ``(row, column, term, count)`` tuples (FTS5's ``instance`` vocabulary,
    grouped): word order is lost, which BM25 does not use."""
    built: dict[int, list[list[str]]] = {}
    for row, column, term, count in instances:
        cols = built.setdefault(int(row), [[], [], []])
        cols[int(column)].extend([str(term)] * int(count))
    return {row: (" ".join(c[0]), " ".join(c[1]), " ".join(c[2])) for row, c in built.items()}
