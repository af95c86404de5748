"""Session leases inside the caller's transaction: acquire, renew, release, and the epoch checks of writes.

One run per session across processes (docs/scaling.md): a session's lease row names its holder until
``expires_at``; every new tenure bumps ``epoch``, the fencing token that a run's writes carry. A claim
made under a lease stamps its items with the epoch (``queue_items.claim_epoch``); a release, a settlement
or the turn that consumes them is refused (:class:`LeaseLostError`, nothing written) once the lease
expired or a newer epoch exists. Expiry is judged by the database's clock: on PostgreSQL the server's
(processes on several machines), on SQLite this machine's.

The functions take a connection inside a transaction, as the queue's do, so a claim and its lease check
are one transaction. PostgreSQL reads a lease row to take it ``FOR UPDATE SKIP LOCKED``: a row another
acquirer is deciding on counts as taken, and nobody waits on a lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger._rows import is_postgres
from nexus.ledger.errors import LeaseLostError
from nexus.ledger.records import Lease
from nexus.llm import now_ms

_COLUMNS = "session_label, holder, epoch, expires_at, acquired_at"


def db_now(conn: Any) -> int:
    """The database's clock in Unix ms: the server's on PostgreSQL, this machine's on SQLite."""
    if is_postgres(conn):
        return int(conn.execute("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT").fetchone()[0])
    return now_ms()


def _lease(row: Sequence[Any], prior: str | None = None) -> Lease:
    return Lease(str(row[0]), row[1], int(row[2]), int(row[3]), int(row[4]), prior)


def acquire_in(conn: Any, session_label: str, holder: str, ttl_ms: int) -> Lease | None:
    """Take (or renew) the session's lease for ``ttl_ms``; ``None`` while another holder's lease is valid."""
    _check_ttl(ttl_ms)
    if not holder:
        raise ValueError("a lease holder needs a name")
    now = db_now(conn)
    lock = " FOR UPDATE SKIP LOCKED" if is_postgres(conn) else ""
    row = conn.execute(
        f"SELECT holder, epoch, expires_at, acquired_at FROM session_leases WHERE session_label = ?{lock}",
        (session_label,),
    ).fetchone()
    if row is None:
        return _first(conn, session_label, holder, now, ttl_ms)
    current, epoch, expires_at, acquired_at = row[0], int(row[1]), int(row[2]), int(row[3])
    valid = current is not None and expires_at > now
    if valid and current != holder:
        return None
    if valid:  # the caller's own lease: renewed, same tenure
        conn.execute("UPDATE session_leases SET expires_at = ? WHERE session_label = ?", (now + ttl_ms, session_label))
        return Lease(session_label, holder, epoch, now + ttl_ms, acquired_at)
    conn.execute(
        "UPDATE session_leases SET holder = ?, epoch = ?, expires_at = ?, acquired_at = ? WHERE session_label = ?",
        (holder, epoch + 1, now + ttl_ms, now, session_label),
    )
    prior = current if current is not None and current != holder else None  # expired while held: a takeover
    return Lease(session_label, holder, epoch + 1, now + ttl_ms, now, prior)


def _first(conn: Any, session_label: str, holder: str, now: int, ttl_ms: int) -> Lease | None:
    """The session's first lease (epoch 1); ``None`` when another acquirer holds the row (skipped, or racing)."""
    if (
        is_postgres(conn)
        and conn.execute("SELECT 1 FROM session_leases WHERE session_label = ?", (session_label,)).fetchone()
    ):
        return None  # the row exists, locked by another acquirer: taken
    inserted = conn.execute(
        "INSERT INTO session_leases (session_label, holder, epoch, expires_at, acquired_at) VALUES (?, ?, 1, ?, ?)"
        " ON CONFLICT (session_label) DO NOTHING",
        (session_label, holder, now + ttl_ms, now),
    ).rowcount
    return Lease(session_label, holder, 1, now + ttl_ms, now) if inserted else None


def renew_in(conn: Any, lease: Lease, ttl_ms: int) -> Lease:
    """Extend a valid lease by ``ttl_ms`` from now; :class:`LeaseLostError` if it expired or was taken."""
    _check_ttl(ttl_ms)
    now = check_in(conn, lease)
    conn.execute(
        "UPDATE session_leases SET expires_at = ? WHERE session_label = ? AND epoch = ?",
        (now + ttl_ms, lease.session_label, lease.epoch),
    )
    return Lease(lease.session_label, lease.holder, lease.epoch, now + ttl_ms, lease.acquired_at)


def release_in(conn: Any, lease: Lease) -> bool:
    """Give the lease up (the epoch stays: the next tenure is newer); False if it was no longer the caller's."""
    released = conn.execute(
        "UPDATE session_leases SET holder = NULL, expires_at = ? WHERE session_label = ? AND epoch = ? AND holder = ?",
        (db_now(conn), lease.session_label, lease.epoch, lease.holder),
    ).rowcount
    if released:
        notify_released_in(conn, lease.session_label)
    return bool(released)


def get_in(conn: Any, session_label: str) -> Lease | None:
    """The session's lease row as it is (``holder`` ``None``: released), or ``None`` if it never had one."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM session_leases WHERE session_label = ?", (session_label,)).fetchone()
    return None if row is None else _lease(row)


def expired_in(conn: Any, limit: int) -> list[Lease]:
    """Leases that expired while held (their holder stopped renewing: died, paused, cut off), oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM session_leases WHERE holder IS NOT NULL AND expires_at <= ? ORDER BY expires_at"
        " LIMIT ?",
        (db_now(conn), limit),
    ).fetchall()
    return [_lease(row) for row in rows]


def check_in(conn: Any, lease: Lease) -> int:
    """Refuse a write under ``lease`` unless it is still valid (same holder and epoch, not expired); returns now."""
    row = conn.execute(
        "SELECT holder, epoch, expires_at FROM session_leases WHERE session_label = ?", (lease.session_label,)
    ).fetchone()
    now = db_now(conn)
    if row is None or row[0] != lease.holder or int(row[1]) != lease.epoch:
        raise LeaseLostError(lease.session_label, lease.epoch, "taken over by a newer epoch" if row else "no lease")
    if int(row[2]) <= now:
        raise LeaseLostError(lease.session_label, lease.epoch, "expired")
    return now


def lock_leases_in(conn: Any, item_ids: Sequence[str], lease: Lease | None = None) -> None:
    """PostgreSQL: lock (``FOR SHARE``) the lease rows of the sessions of ``item_ids`` (and ``lease``'s) until
    the transaction ends, so the fence a turn write checks cannot change before it commits.

    A turn write runs ``READ COMMITTED`` (``row_locks=True``): without the lock, another process could take
    the session over (a new epoch) between the check and the commit. With it, that acquire skips the row
    (``FOR UPDATE SKIP LOCKED``: taken, look again later) and a renewal waits for the commit. SQLite: nothing
    (its writes run one at a time).
    """
    if not is_postgres(conn) or not (item_ids or lease):
        return
    marks = ", ".join("?" * len(item_ids)) or "NULL"
    conn.execute(
        "SELECT 1 FROM session_leases WHERE session_label = ? OR session_label IN"
        f" (SELECT session_label FROM queue_items WHERE id IN ({marks})) ORDER BY session_label FOR SHARE",
        (None if lease is None else lease.session_label, *item_ids),
    )


def check_consumed_in(conn: Any, item_ids: Sequence[str], claimant: str) -> None:
    """The fence of a turn's write: its consumed items that a lease claimed must still be this run's.

    An item stamped with a ``claim_epoch`` must be claimed by ``claimant`` (this process) at its session's
    current, unexpired epoch; otherwise the run lost its lease and :class:`LeaseLostError` stops the whole
    write (no turn, no head move). Finished items count too: the new holder may have run and delivered
    them already, and a stale turn appended after its turn would still move the head. Items claimed
    without a lease are not checked here.
    """
    for claim in leased_claims(conn, item_ids):
        if claim.claimed_by != claimant or claim.epoch != claim.claimed_at:
            raise LeaseLostError(claim.session_label, claim.claimed_at, "taken over by a newer epoch")
        if not claim.live:
            raise LeaseLostError(claim.session_label, claim.claimed_at, "expired" if claim.held else "released")


@dataclass(frozen=True, slots=True)
class LeasedClaim:
    """An item claimed under a lease, beside its session's lease as it is now (:func:`leased_claims`)."""

    item_id: str
    session_label: str
    claimed_at: int
    """The epoch the item was claimed at."""
    claimed_by: str | None
    epoch: int | None
    """The session lease's current epoch (``None``: no lease row)."""
    held: bool
    live: bool
    """The session's lease is held and unexpired by the database's clock."""

    @property
    def valid(self) -> bool:
        """The claim's lease is still the session's current, live one: its run may go on writing."""
        return self.live and self.epoch == self.claimed_at


def leased_claims(conn: Any, item_ids: Sequence[str]) -> list[LeasedClaim]:
    """The items among ``item_ids`` that were claimed under a lease, each with its session's lease now."""
    if not item_ids:
        return []
    marks = ", ".join("?" * len(item_ids))
    rows = conn.execute(
        "SELECT q.id, q.session_label, q.claim_epoch, q.claimed_by, l.epoch, l.holder, l.expires_at FROM queue_items q"
        " LEFT JOIN session_leases l ON l.session_label = q.session_label"
        f" WHERE q.id IN ({marks}) AND q.claim_epoch IS NOT NULL",
        tuple(item_ids),
    ).fetchall()
    if not rows:
        return []
    now = db_now(conn)
    return [
        LeasedClaim(
            str(item),
            str(label),
            int(claimed),
            by,
            None if epoch is None else int(epoch),
            holder is not None,
            holder is not None and int(expires) > now,
        )
        for item, label, claimed, by, epoch, holder, expires in rows
    ]


def _check_ttl(ttl_ms: int) -> None:
    if not isinstance(ttl_ms, int) or ttl_ms <= 0:
        raise ValueError(f"a lease's time to live is a positive number of milliseconds, not {ttl_ms!r}")


WAKE_CHANNEL = "nexus_queue"
"""PostgreSQL's notification channel for queue wake-ups (``nexus.ledger.postgres._listen``)."""


def notify_ready_in(conn: Any, session_labels: Sequence[str]) -> None:
    """PostgreSQL: one notification when an accept made one of these sessions ready that no broker holds.

    A session whose lease is held is run by its holder, which sees the new item itself (its look at the
    queue, or its release notifies); only idle -> ready transitions wake the others. NOTIFY serialises
    commits on a global lock, so a group commit sends one at most. SQLite: nothing (no listeners).
    """
    if not session_labels or not is_postgres(conn):
        return
    wanted = sorted(set(session_labels))
    marks = ", ".join("?" * len(wanted))
    held = conn.execute(
        f"SELECT count(*) FROM session_leases WHERE session_label IN ({marks}) AND holder IS NOT NULL"
        " AND expires_at > ?",
        (*wanted, db_now(conn)),
    ).fetchone()[0]
    if int(held) < len(wanted):
        conn.execute(f"SELECT pg_notify('{WAKE_CHANNEL}', ?)", (wanted[0] if len(wanted) == 1 else "",))


def notify_released_in(conn: Any, session_label: str) -> None:
    """PostgreSQL: a released lease over work still waiting wakes the other brokers for that session."""
    if not is_postgres(conn):
        return
    waiting = conn.execute(
        "SELECT 1 FROM queue_items WHERE status IN ('queued', 'processing') AND session_label = ? LIMIT 1",
        (session_label,),
    ).fetchone()
    if waiting is not None:
        conn.execute(f"SELECT pg_notify('{WAKE_CHANNEL}', ?)", (session_label,))
