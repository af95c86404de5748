"""Broker processes under session leases on one shared database, for ``test_lease_processes.py`` and
``test_lease_faults.py``: the processes and the total-queue check are :mod:`nexus.testing.faults` (shared
with the full-size fault bench, ``bench/fault_postgres.py``); :func:`running_in` is these tests' own.
"""

from __future__ import annotations

from nexus.testing.faults import BrokerProcess as Worker
from nexus.testing.faults import all_finished, check_ledger, check_runs, fill, rows, wait_for

__all__ = ["Worker", "all_finished", "check_ledger", "check_runs", "fill", "rows", "running_in", "wait_for"]


def running_in(target: str, pid: int) -> str:
    """The id of an item the broker ``pid`` runs now (waited for)."""
    found = wait_for(
        target,
        f"SELECT id FROM queue_items WHERE status = 'processing' AND claimed_by LIKE '%:{pid} %'",
        f"process {pid} runs an item",
    )
    return str(found[0][0])
