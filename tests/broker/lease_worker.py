"""A broker process for the lease tests: ``nexus.testing.broker_runtime`` run as a script (see there).

python lease_worker.py TARGET TTL_MS RUN_S [POLL_MS [WAKEUPS]]
"""

from __future__ import annotations

import sys

from nexus.testing.broker_runtime import main

if __name__ == "__main__":
    main(sys.argv[1:])
