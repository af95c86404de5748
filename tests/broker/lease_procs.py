"""Broker processes under session leases on one shared database, for ``test_lease_processes.py`` and
``test_lease_faults.py``: the processes and the total-queue check are :mod:`nexus.testing.faults` (shared
with the full-size fault bench, ``bench/fault_postgres.py``); :func:`running_in` is these tests' own.
"""

from __future__ import annotations

from nexus.ledger import Ledger
from nexus.testing.faults import BrokerProcess as Worker
from nexus.testing.faults import all_finished, check_ledger, check_runs, fill, register, requests, rows, wait_for

__all__ = [
    "Worker",
    "accept_range",
    "all_finished",
    "check_ledger",
    "check_runs",
    "fill",
    "register_only",
    "rows",
    "running_in",
    "wait_for",
]


async def register_only(target: str, agents: int) -> None:
    """Agents ``a0`` .. without messages."""
    async with await Ledger.connect(target) as ledger:
        await register(ledger, agents)


async def accept_range(target: str, first: int, end: int) -> None:
    """Messages ``a0-m{first}`` .. ``a0-m{end-1}`` to agent ``a0`` (followups), in order."""
    async with await Ledger.connect(target) as ledger:
        for request in list(requests(1, end))[first:]:
            await ledger.queue.accept(request)


def running_in(target: str, pid: int) -> str:
    """The id of an item the broker ``pid`` runs now (waited for)."""
    found = wait_for(
        target,
        f"SELECT id FROM queue_items WHERE status = 'processing' AND claimed_by LIKE '%:{pid} %'",
        f"process {pid} runs an item",
    )
    return str(found[0][0])
