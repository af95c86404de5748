"""The Agents Ledger's conformance suite: what every storage backend must do, as pytest tests.

A backend proves itself by running these tests against its stores. In a test module of your own::

    import pytest
    from nexus.testing.conformance import *  # noqa: F403  (every test of the suite)

    @pytest.fixture
    async def ledger(tmp_path):
        ledger = await open_my_backend(...)   # an object with .turns, .sessions, .queue (and optional stores)
        yield ledger
        await close_my_backend(ledger)

The tests are ``async`` (run them with pytest-asyncio in ``auto`` mode) and use only the protocols of
:mod:`nexus.ledger.protocols`. Required: ``TurnStore`` (``ledger.turns``), ``SessionStore``
(``ledger.sessions``) and ``QueueStore`` (``ledger.queue``). Optional, each tested only where the
backend has it (:data:`OPTIONAL`): ``TurnTree`` (tree questions), ``PointerLog`` (the pointer log),
``QueueFeed``, ``AgentStore`` (``ledger.agents``), ``DeliveryStore`` (``ledger.deliveries``), ``LeaseStore``
(``ledger.leases``), ``routing`` (smart routing's store in the same database,
:func:`nexus.routing.open_route_store`); a test that needs a missing one is skipped, naming it. The lease
race needs other connections to the same database: a ``reopen`` fixture (see :mod:`.leases`). See docs/testing.md.
"""

from __future__ import annotations

from nexus.testing.conformance.compaction import *  # noqa: F403
from nexus.testing.conformance.journal import *  # noqa: F403
from nexus.testing.conformance.leases import *  # noqa: F403
from nexus.testing.conformance.queue import *  # noqa: F403
from nexus.testing.conformance.registry import *  # noqa: F403
from nexus.testing.conformance.routing import *  # noqa: F403
from nexus.testing.conformance.sessions import *  # noqa: F403
from nexus.testing.conformance.support import OPTIONAL, REQUIRED, has
from nexus.testing.conformance.turns import *  # noqa: F403

__all__ = ["OPTIONAL", "REQUIRED", "has"]
__all__ += [name for name in dir() if name.startswith("test_")]
