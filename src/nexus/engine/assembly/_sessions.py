"""Per-session state owned by the runtime, bounded by bytes (no module-level caches).

A session's next run reuses what its last run derived from the same history objects: the
per-message token estimates (context assembly) and the repaired payload prefix (the run's
context window). Both used to live in module-level lists keyed by ``id(list)`` — a hidden
channel between assembly and the run, and a thrash point once more than 16 sessions were
live. Now each session has one :class:`SessionCache`, and :class:`SessionStates` keeps the
most recently used ones within a byte budget (least recently used evicted first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import field

from nexus._dataclass import dataclass
from nexus.llm import Message

PrefixKey = tuple[int, str | None, int | None, int]
"""(cut, summary, level-2 truncation, result cap): a repaired prefix is valid only under the same key."""

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Default budget of all session caches of a runtime (about 3 KB for a 20-message session)."""

_SLOT = 8  # bytes per list slot (a pointer)
_BASE = 200  # the cache object, its lists and its OrderedDict entry


@dataclass(slots=True)
class EstimateEntry:
    """A history's per-message estimates and the newest usage-reporting message (index, tokens)."""

    messages: list[Message]
    values: list[int]
    last: int
    reported: int


@dataclass(slots=True, eq=False)
class SessionCache:
    """What the next run of one session may reuse; every field is checked against the messages before use.

    Call :meth:`changed` after setting a field so the owner can account for the bytes.
    """

    label: str = ""
    owner: SessionStates | None = field(default=None, repr=False)
    estimates: EstimateEntry | None = None
    prefix: tuple[PrefixKey, list[Message], list[Message]] | None = None
    nbytes: int = field(default=_BASE)

    def changed(self) -> None:
        """Tell the owner (if any) that this cache changed size."""
        if self.owner is not None:
            self.owner.updated(self)

    def measure(self) -> int:
        """Approximate bytes held: list slots plus the text the cached messages hold (4 chars a token)."""
        size = _BASE
        if self.estimates is not None:
            size += _SLOT * 2 * len(self.estimates.values) + 4 * sum(self.estimates.values)
        if self.prefix is not None:
            size += _SLOT * (len(self.prefix[1]) + len(self.prefix[2]))
        self.nbytes = size
        return size


class SessionStates:
    """label -> :class:`SessionCache`, least recently used first, within ``max_bytes`` in total."""

    __slots__ = ("_caches", "_total", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._caches: OrderedDict[str, SessionCache] = OrderedDict()
        self._total = 0

    def get(self, label: str) -> SessionCache:
        """The cache of ``label`` (created empty), marked most recently used."""
        cache = self._caches.get(label)
        if cache is None:
            cache = self._caches[label] = SessionCache(label, self)
            self._total += cache.nbytes
        else:
            self._caches.move_to_end(label)
        return cache

    def updated(self, cache: SessionCache) -> None:
        """``cache`` changed: re-measure it and evict the least recently used over the budget."""
        if self._caches.get(cache.label) is not cache:
            return  # evicted meanwhile: it lives on only in the run that holds it
        before = cache.nbytes
        self._total += cache.measure() - before
        while self._total > self.max_bytes and len(self._caches) > 1:
            _, evicted = self._caches.popitem(last=False)
            self._total -= evicted.nbytes

    def __len__(self) -> int:
        return len(self._caches)

    @property
    def nbytes(self) -> int:
        """Approximate bytes held by every session cache."""
        return self._total
