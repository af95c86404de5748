"""Freshness: the files a checkpoint's tools touched, stamped when it was indexed and compared with the disk.

A checkpoint whose files changed since (another branch rewrote them, a checkout was reset, a person
edited them) holds a picture of the code that is no longer true, so it counts less. A stamp is the
file's size, mtime and a SHA-256 of its content (of its first :data:`HASH_BYTES` for a larger file):
a file with the same size and mtime is taken as unchanged without reading it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from nexus.routing.store import FileStamp

HASH_BYTES = 1 << 20
MISSING = "missing"


def resolve(path: str, workspace: str | None) -> str:
    """``path`` as the tool saw it, made absolute against the turn's workspace."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and workspace:
        candidate = Path(workspace) / candidate
    return os.path.normpath(str(candidate))


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        sha.update(f.read(HASH_BYTES))
    return sha.hexdigest()[:32]


def stamp(path: str, name: str = "") -> FileStamp:
    """The file as it is now (a missing or unreadable file gets the digest ``missing``)."""
    try:
        info = os.stat(path)
        return FileStamp(path, info.st_size, info.st_mtime_ns, _digest(path), name or path)
    except OSError:
        return FileStamp(path, -1, 0, MISSING, name or path)


def stamp_all(paths: Iterable[str], workspace: str | None) -> tuple[FileStamp, ...]:
    return tuple(stamp(resolve(p, workspace), p) for p in paths)


def unchanged(recorded: FileStamp) -> bool:
    """Whether the file still is as recorded (size + mtime first; the content hash when those moved)."""
    try:
        info = os.stat(recorded.path)
    except OSError:
        return recorded.digest == MISSING
    if recorded.digest == MISSING:
        return False
    if info.st_size == recorded.size and info.st_mtime_ns == recorded.mtime_ns:
        return True
    try:
        return _digest(recorded.path) == recorded.digest
    except OSError:
        return False


def freshness(files: Sequence[FileStamp]) -> float:
    """The share of a checkpoint's files that are unchanged (1.0 for a checkpoint that touched none)."""
    if not files:
        return 1.0
    return sum(1 for f in files if unchanged(f)) / len(files)
