"""``nexus serve``: the ledger and the broker over HTTP (DESIGN §4.7; docs/server.md).

Import :func:`create_app` from :mod:`nexus.server.app` (FastAPI loads only then).
"""

from __future__ import annotations
