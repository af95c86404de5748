"""Smart routing (seed 003 §7, DESIGN §4.6): route a task to the checkpoint of past work it continues.

``Router(ledger).route("fix the login test")`` answers a :class:`SmartRouteResult`: ``existing`` with the
:class:`Checkpoint` (a finished turn) to fork from, or ``new``, with a calibrated ``confidence``. The index
(BM25 + embeddings + facets over checkpoint texts derived from turns) lives in the ledger, SQLite or
PostgreSQL (:func:`open_route_store`), and grows as turns are written. The broker's ``route_smart`` /
``fork_from`` build on it. See docs/routing.md.

Importing this package is cheap; numpy and the embedder load with the first :class:`Router`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.routing.errors import EmbedderError, RouteRequestError, RoutingError, UnknownRouteAgent
from nexus.routing.types import ROUTING_MODES, Checkpoint, RouteMode, RoutingMode, ScoredCheckpoint, SmartRouteResult

if TYPE_CHECKING:
    from nexus.routing._backend import open_route_store
    from nexus.routing._sqlite_store import SqliteRouteStore
    from nexus.routing.ab import arm_for, compare
    from nexus.routing.embedder import Embedder, OpenAIEmbedder, WordLlamaEmbedder
    from nexus.routing.router import Router, RouteSettings
    from nexus.routing.store import DecisionRecord, RouteStore

_LAZY: dict[str, str] = {
    "SqliteRouteStore": "nexus.routing._sqlite_store",
    "DecisionRecord": "nexus.routing.store",
    "compare": "nexus.routing.ab",
    "arm_for": "nexus.routing.ab",
    "Embedder": ".embedder",
    "OpenAIEmbedder": ".embedder",
    "WordLlamaEmbedder": ".embedder",
    "RouteSettings": ".router",
    "Router": ".router",
    "open_route_store": "._backend",
    "RouteStore": ".store",
}

__all__ = [
    "ROUTING_MODES",
    "Checkpoint",
    "DecisionRecord",
    "Embedder",
    "EmbedderError",
    "OpenAIEmbedder",
    "RouteMode",
    "RouteRequestError",
    "RouteSettings",
    "RouteStore",
    "Router",
    "RoutingError",
    "RoutingMode",
    "ScoredCheckpoint",
    "SmartRouteResult",
    "SqliteRouteStore",
    "UnknownRouteAgent",
    "WordLlamaEmbedder",
    "arm_for",
    "compare",
    "open_route_store",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
