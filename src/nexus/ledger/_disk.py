"""Whether the disk under a path is full: what turns SQLite's "disk I/O error" into advice a user can act on.

SQLite reports a full disk as ``SQLITE_FULL`` only when a page write fails; when the write of its
shared-memory index (the ``-shm`` file a WAL database needs even to be read) or a journal fails first,
it says "disk I/O error". A stranger's trial filled a disk: ``nexus db check`` then called the ledger
DAMAGED and advised restoring a backup, and ``nexus run`` pointed at permissions and ``lsattr``; the
file was whole both times. A read-only directory (:func:`read_only_place`) fails the same way for the same
reason: no room for the files SQLite keeps beside the ledger.
"""

from __future__ import annotations

import os
from pathlib import Path

FULL_BELOW_BYTES = 1 << 20
"""Less room than this (for an unprivileged writer) counts as full: SQLite needs a few pages and a 32 KiB index."""


def full_disk(path: Path) -> str | None:
    """``"the disk holding PATH is full (N KiB free)"`` when the filesystem under ``path`` has (almost) no room."""
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        found = os.statvfs(where)
    except OSError:
        return None
    free = found.f_bavail * found.f_frsize
    if free >= FULL_BELOW_BYTES:
        return None
    return f"the disk holding {path} is full ({free // 1024:,} KiB free)"


def read_only_place(path: Path) -> str | None:
    """``"the directory holding PATH is read-only"`` when SQLite cannot make its files beside ``path`` there.

    A WAL ledger needs its ``-shm`` index beside the file even to be read: on a read-only mount (a backup, a
    snapshot) or in a directory this user cannot write, opening it fails with "unable to open database file",
    which said nothing of the cause, and ``nexus db check`` called the whole file DAMAGED.
    """
    directory = path.parent
    if not directory.is_dir() or os.access(directory, os.W_OK):
        return None
    return f"the directory holding {path} is read-only (for this user)"
