"""The path of one session in the API: ``/sessions/{label}``, where a label may hold ``/``.

The engine names a sub-agent's session ``<parent>/<label>-<ulid>`` (nested sub-agents add more), so a route
that takes one path segment answered 404 for every sub-agent session the API itself listed (and the web UI,
which sends the label as ``%2F…``, decoded before routing, showed "Not Found"). The ``session_label``
converter takes several segments, but never a last one that names a sub-resource (``…/history``,
``/events``): a session route's own suffix stays its own, and ``OPTIONS`` / 405's ``Allow`` stay exact.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

SUB_RESOURCES = ("history", "tree", "export", "events", "fork")
"""The last path segments the session routes add after a label (a label's own last segment cannot be one)."""


class SessionLabelConvertor(Convertor[str]):
    """One or more path segments; after a ``/``, not a last segment in :data:`SUB_RESOURCES`."""

    regex = r"[^/]+(?:/(?!(?:" + "|".join(SUB_RESOURCES) + r")$)[^/]+)*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("session_label", SessionLabelConvertor())

SESSION = "/sessions/{label:session_label}"
"""A session's route path (FastAPI shows it as ``/sessions/{label}`` in the OpenAPI document)."""
