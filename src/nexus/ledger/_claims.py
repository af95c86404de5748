"""Claiming queue items for a run: an item another live broker holds is refused, whatever its lock said.

One broker per database is the broker lock's job (``nexus.broker.host``), but a lock file is only as
good as every process finding the same one: a lock file removed while held, or a second name of the
database the lock cannot know, and two brokers drain one queue. Each broker then reloads the items
the other is running (``processing``, as a crashed broker leaves them) and runs them again. So a
claim stamps the item with its broker (``claimed_by``: ``host:pid`` as turns are stamped, and the
process's start time) and takes a ``processing`` item only from a broker that is gone: this process,
nobody (a row older than the column), or a process of this host that no longer runs - or whose pid
now belongs to a process started later (a reused pid must not keep a dead broker's items held).
Another host's process cannot be checked and counts as alive, as it does for open turns
(``nexus.ledger._crash``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from nexus.ledger._owners import owner, owner_dead
from nexus.ledger.errors import QueueItemsFinishedError, QueueItemsHeldError
from nexus.llm import now_ms

_CLAIM = (
    "UPDATE queue_items SET status = 'processing', attempts = attempts + 1, started_at = ?, completed_at = NULL,"
    " claimed_by = ?, claim_epoch = ? WHERE id IN ({ids}) AND (+status = 'queued'"
    " OR (+status = 'processing' AND (claimed_by IS NULL OR claimed_by = ? OR claim_epoch < ?)))"
)
"""``+status`` keeps the status terms off the indexes (see ``move_items``: with a few dozen ids SQLite
would otherwise walk the index of every unfinished item instead of each id's primary key). An item
claimed at an older lease epoch than the caller's is the lost run's: taken over (``claim_epoch < NULL``,
a claim without a lease, is never true)."""

_TAKE_OVER = (
    "UPDATE queue_items SET attempts = attempts + 1, started_at = ?, claimed_by = ?, claim_epoch = ?"
    " WHERE id = ? AND status = 'processing' AND claimed_by = ?"
)


def claim_in(conn: sqlite3.Connection, item_ids: Sequence[str], epoch: int | None = None) -> None:
    """A run takes these items (inside the caller's transaction): ``processing``, one more attempt, this broker's.

    ``epoch`` is the session lease's the claim is made under (checked by the caller in the same
    transaction; ``None``: no lease), stamped on the items. Raises :class:`QueueItemsHeldError` when
    another live broker holds one of them (nothing of the call is then meant to commit: the caller's
    transaction or savepoint rolls back), and :class:`QueueItemsFinishedError` for items already finished
    or unknown.
    """
    if not item_ids:
        return
    me, now = claimant(), now_ms()
    placeholders = ", ".join("?" * len(item_ids))
    cursor = conn.execute(_CLAIM.format(ids=placeholders), (now, me, epoch, *item_ids, me, epoch))
    if cursor.rowcount != len(set(item_ids)):
        _claim_the_rest(conn, item_ids, me, now, epoch)


def _claim_the_rest(conn: sqlite3.Connection, item_ids: Sequence[str], me: str, now: int, epoch: int | None) -> None:
    """The items the one ``UPDATE`` did not take: a dead broker's are taken over, any other is refused.

    An item claimed under a lease whose epoch is still the current, unexpired one is held by that
    lease's run, wherever it runs; one claimed under a lease that expired is a dead run's.
    """
    placeholders = ", ".join("?" * len(item_ids))
    rows = conn.execute(
        f"SELECT id, status, claimed_by FROM queue_items WHERE id IN ({placeholders})", tuple(item_ids)
    ).fetchall()
    found = {str(row[0]): (str(row[1]), row[2]) for row in rows}
    finished: dict[str, str] = {}
    held: dict[str, str] = {}
    live = _leased_live(conn, [i for i, (status, _) in found.items() if status == "processing"])
    for item_id in dict.fromkeys(item_ids):
        status, holder = found.get(item_id, ("missing", None))
        if status not in ("queued", "processing"):
            finished[item_id] = status
        elif status == "processing" and holder not in (None, me):
            alive = live[item_id] if item_id in live else not holder_gone(str(holder))
            if not alive:
                conn.execute(_TAKE_OVER, (now, me, epoch, item_id, holder))
            else:
                held[item_id] = str(holder).partition(" ")[0]
    if held:
        raise QueueItemsHeldError(held, finished)
    if finished:
        raise QueueItemsFinishedError("processing", finished)


def held_by_others(conn: sqlite3.Connection, item_ids: Sequence[str]) -> set[str]:
    """Which of these ``processing`` items a live run holds (a start or a sweep must not fail or rerun them).

    An item claimed under a lease is held while that lease is valid, whoever claimed it: this process too
    (a broker's own sweep failed the item its own run had just claimed for a last attempt, and the run's
    turn was written over a "failed" message). One claimed without a lease is held by another live broker.
    """
    if not item_ids:
        return set()
    me = claimant()
    placeholders = ", ".join("?" * len(item_ids))
    rows = conn.execute(
        f"SELECT id, claimed_by FROM queue_items WHERE id IN ({placeholders}) AND status = 'processing'",
        tuple(item_ids),
    ).fetchall()
    live = _leased_live(conn, [str(row[0]) for row in rows])
    return {
        str(row[0])
        for row in rows
        if (live[row[0]] if row[0] in live else row[1] not in (None, me) and not holder_gone(str(row[1])))
    }


def _leased_live(conn: sqlite3.Connection, item_ids: Sequence[str]) -> dict[str, bool]:
    """For the items among these that were claimed under a lease: whether that lease is still valid.

    A lease is the truth for its items wherever their claimant runs (another machine's process cannot
    be checked by its pid): valid while its epoch is the session's current one and unexpired.
    """
    from nexus.ledger._leases import leased_claims

    return {claim.item_id: claim.valid for claim in leased_claims(conn, item_ids)}


_CLAIMANTS: dict[int, str] = {}
"""Each process's name as its claims give it, by pid: a forked child is another claimant."""


def claimant() -> str:
    """This process as a claim names it: ``host:pid start`` (the start time in clock ticks since boot, on Linux).

    Made once a process: every claim names it, and making it (the host name asked of the system) cost ~2 us."""
    pid = os.getpid()
    me = _CLAIMANTS.get(pid)
    if me is None:
        start = _start_ticks(pid)
        me = _CLAIMANTS[pid] = f"{owner()} {start}" if start else owner()
    return me


def holder_gone(holder: str) -> bool:
    """Whether the broker a claim names no longer runs: its pid is dead, or taken by a process started since."""
    process, _, start = holder.partition(" ")
    if owner_dead(process):
        return True
    host, _, pid = process.rpartition(":")
    if not start or not pid.isdigit() or host != owner().rpartition(":")[0]:
        return False
    now = _start_ticks(int(pid))
    return now is not None and now != start


def _start_ticks(pid: int) -> str | None:
    """Field 22 of ``/proc/PID/stat`` (when the process started); ``None`` where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None
