"""Errors of smart routing: what a user can hit, with what to do."""

from __future__ import annotations

from nexus.errors import NexusError


class RoutingError(NexusError):
    """A routing request that cannot be answered (an empty task, an unknown agent, a bad setting)."""


class EmbedderError(RoutingError):
    """The embedder could not embed (a missing package, a provider that failed); routing falls back to lexical."""


class UnknownRouteAgent(RoutingError, LookupError):
    """``agent`` names no registered agent (``POST /v1/route`` answers 404, as for any unknown agent)."""
