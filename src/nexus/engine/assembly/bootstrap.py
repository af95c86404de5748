"""Bootstrap files: the markdown files in the workspace that customise the agent (seed 001).

They go into the system prompt, so their size is capped (50k chars each, 200k in total)
to keep a runaway ``MEMORY.md`` from eating the context window. Missing or empty files
are skipped silently: a fresh workspace has only the starter ``AGENTS.md``.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from nexus._dataclass import dataclass
from nexus.errors import ConfigError

BOOTSTRAP_FILES: tuple[str, ...] = (
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "IDENTITY.md",
    "MEMORY.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
)
"""The files looked for, in the order they appear in the system prompt."""

MAX_FILE_CHARS = 50_000
MAX_TOTAL_CHARS = 200_000

STARTER_AGENTS_MD = """\
# AGENTS.md

Instructions for the agent working in this workspace. Edit freely: this file is read
at the start of every run and placed in the system prompt.

## How to work
- Read files before changing them; prefer small, reviewable edits.
- Say what you did and what you did not do. Never claim a tool ran when it did not.
- Ask before doing anything destructive or irreversible.

## Other files you can add here
- SOUL.md (persona and tone), USER.md (who you work for), TOOLS.md (tool notes),
  IDENTITY.md, MEMORY.md (long-term notes), HEARTBEAT.md (recurring tasks), BOOTSTRAP.md.
"""


@dataclass(slots=True, frozen=True)
class BootstrapFile:
    """One loaded file: its name, the (possibly truncated) text, and its full size (bytes when cut)."""

    name: str
    path: Path
    content: str
    original_size: int
    truncated: bool = False


def truncation_marker(name: str, shown: int, size: int) -> str:
    """The line appended to a cut file, telling the model the rest exists and where."""
    return (
        f"\n\n[... {name} truncated: showing the first {shown} characters of {size} bytes; read the file for the rest]"
    )


_Stamp = tuple[int, int, int, int] | None
_CACHE_MAX = 64


@dataclass(slots=True, frozen=True)
class _Cached:
    """One cached load: the workspace directory's stamp (``None``: not to be trusted), which names have an
    entry in it (by index), each file's stamp, and the loaded files."""

    directory: _Stamp
    entries: tuple[int, ...]
    stamps: tuple[_Stamp, ...]
    files: list[BootstrapFile]


_cache: dict[tuple[str, tuple[str, ...], int, int], _Cached] = {}
"""(workspace, names, caps) -> the last load and its stamps: a re-read only after an edit."""
_paths: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
"""(workspace, names) -> the files' paths, joined once (every run stats them)."""

SETTLED_NS = 2_000_000_000
"""How old the workspace directory's mtime must be before it vouches that no bootstrap file appeared.

Timestamps come from a coarse clock (a tick of a few ms): a file created in the same tick as the
directory's last change leaves its mtime as it was. A change after the stamp was taken, once the
directory's mtime is this far in the past, moves it."""


def _stamp(path: str) -> _Stamp:
    """(mtime_ns, ctime_ns, size, inode) of a regular file; None when it is missing or not a file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino


def _directory_stamp(path: str) -> _Stamp:
    """(mtime_ns, ctime_ns, inode, device) of the workspace; None when it is missing or changed too recently
    to vouch for its entries (see :data:`SETTLED_NS`)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if max(st.st_mtime_ns, st.st_ctime_ns) > time.time_ns() - SETTLED_NS:
        return None
    return st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def _has_entry(path: str) -> bool:
    """Whether the directory holds ``path``'s name at all (a dangling symlink or a directory counts)."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _read_prefix(path: Path, limit: int) -> tuple[str, int] | None:
    """Up to ``limit`` chars of ``path`` and its full length; None if missing, not a file, or blank."""
    try:
        if not path.is_file():
            return None
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(limit)
            more = handle.read(1) != ""
        size = path.stat().st_size
    except OSError:
        return None
    if not head.strip():
        return None
    # The full size in bytes (not characters): counting a huge file's characters means reading it all.
    return head, max(size, len(head) + 1) if more else len(head)


def load_bootstrap_files(
    workspace: str | Path,
    *,
    names: tuple[str, ...] = BOOTSTRAP_FILES,
    max_file_chars: int = MAX_FILE_CHARS,
    max_total_chars: int = MAX_TOTAL_CHARS,
) -> list[BootstrapFile]:
    """Read the bootstrap files of ``workspace`` within the size caps.

    Each file is cut to ``max_file_chars`` and the total to ``max_total_chars`` (later
    files get what is left; once nothing is left they are dropped). Cut files end with
    :func:`truncation_marker`. A missing workspace yields an empty list.

    Every run reads these files and they rarely change, so the result is cached per process
    and checked with ``stat``: an edit, a new, removed or replaced file (by mtime, ctime, size or
    inode) is read again by the next run. A name can only appear or go by changing the workspace
    directory, so while the directory's stamp is unchanged (and settled, :data:`SETTLED_NS`) only
    the names it holds are stat'ed: two ``stat`` calls a run for a workspace with one ``AGENTS.md``,
    not one per name (eight).
    """
    if max_file_chars <= 0 or max_total_chars <= 0:
        raise ConfigError("bootstrap size caps must be positive (max_file_chars, max_total_chars)")
    base = os.fspath(workspace)
    paths = _paths.get((base, names))
    if paths is None:
        if len(_paths) >= _CACHE_MAX:
            _paths.clear()
        paths = _paths[base, names] = tuple(os.path.join(base, name) for name in names)
    key = (base, names, max_file_chars, max_total_chars)
    cached = _cache.get(key)
    directory = _directory_stamp(base)  # stamped before the files: a change after it moves it
    if (  # no name came or went: only the files that have an entry can have changed
        cached is not None
        and directory is not None
        and cached.directory == directory
        and all(_stamp(paths[i]) == cached.stamps[i] for i in cached.entries)
    ):
        return list(cached.files)
    stamps = tuple(map(_stamp, paths))
    if cached is not None and cached.stamps == stamps:
        files = cached.files
    else:
        files = _load(Path(workspace), names, max_file_chars, max_total_chars)  # stamped before: an edit
    entries: tuple[int, ...] = ()  # during the read is seen next time
    if directory is not None:
        entries = tuple(i for i, path in enumerate(paths) if stamps[i] is not None or _has_entry(path))
    if len(_cache) >= _CACHE_MAX and key not in _cache:
        _cache.clear()
    _cache[key] = _Cached(directory, entries, stamps, files)
    return list(files)


def _load(root: Path, names: tuple[str, ...], max_file_chars: int, max_total_chars: int) -> list[BootstrapFile]:
    """:func:`load_bootstrap_files` without the cache."""
    loaded: list[BootstrapFile] = []
    budget = max_total_chars
    for name in names:
        if budget <= 0:
            break
        limit = min(max_file_chars, budget)
        found = _read_prefix(root / name, limit)
        if found is None:
            continue
        head, size = found
        truncated = size > len(head)
        content = head + truncation_marker(name, len(head), size) if truncated else head
        loaded.append(BootstrapFile(name, root / name, content, size, truncated))
        budget -= len(head)
    return loaded


def scaffold_workspace(workspace: str | Path) -> list[Path]:
    """Create ``workspace`` and a starter ``AGENTS.md`` if missing; never overwrites. Returns what it created.

    The starter file is a courtesy: in a workspace nexus may not write to, it is skipped (the run
    used to end in a ``PermissionError`` traceback).
    """
    if os.path.lexists(os.path.join(workspace, "AGENTS.md")):  # every run after the first: one stat, no Path built
        return []  # (a file in it means the directory exists)
    root = Path(workspace)
    target = root / "AGENTS.md"
    if root.exists() and not root.is_dir():
        raise ConfigError(f"workspace path {root} exists but is not a directory; choose another workspace path")
    created: list[Path] = []
    if not root.exists():
        root.mkdir(parents=True)
        created.append(root)
    try:
        with target.open("x", encoding="utf-8") as handle:  # "x": fails if it exists, even in a race
            handle.write(STARTER_AGENTS_MD)
    except FileExistsError:
        return created
    except OSError:  # a read-only workspace (permissions, `chattr +i`, a read-only mount) is usable: no starter file
        return created
    created.append(target)
    return created
