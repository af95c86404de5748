"""Errors of smart routing: what a user can hit, with what to do."""

from __future__ import annotations

from nexus.errors import NexusError


class RoutingError(NexusError):
    """A routing request that cannot be answered (an empty task, an unknown agent, a bad setting)."""


class RouteRequestError(RoutingError, ValueError):
    """The request itself is wrong (an empty task, a NUL, a limit out of range, an unknown decision id): the
    caller's to fix. Any other :class:`RoutingError` (a ``[routing]`` model file that is not one, numpy
    missing) is the server's: HTTP answers it 500, not 400."""


class EmbedderError(RoutingError):
    """The embedder could not embed (a missing package, a provider that failed); routing falls back to lexical."""


class UnknownRouteAgent(RouteRequestError, LookupError):
    """``agent`` names no registered agent (``POST /v1/route`` answers 404, as for any unknown agent)."""
