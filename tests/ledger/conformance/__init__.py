"""Conformance suite for ``nexus.ledger.LedgerBackend`` implementations.

Every backend must pass these tests. They use only the Protocol's methods. A test module
brings them in with ``from conformance import *`` and the ``backend`` fixture (in
``conformance.common``) runs each test against every factory in ``BACKENDS``; a new backend
(PostgreSQL) adds its factory there or overrides the ``backend`` fixture in its own module.
The tests are split by topic into the modules of this package.
"""

from conformance.common import BACKENDS as BACKENDS
from conformance.common import FIXTURES as FIXTURES
from conformance.common import backend as backend
from conformance.compaction import *  # noqa: F403
from conformance.journal import *  # noqa: F403
from conformance.pi_files import *  # noqa: F403
from conformance.queue import *  # noqa: F403
from conformance.sessions import *  # noqa: F403
from conformance.turns import *  # noqa: F403
