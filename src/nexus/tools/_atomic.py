"""Crash- and disk-full-safe file replacement for ``write``, ``edit`` and ``apply_patch``.

Writing a file in place (``open(path, "wb")``) truncates it first: when the disk fills
half-way, the original is gone and a torn file is left. Here the new content goes to a
temporary file in the same directory, is flushed to disk (``fsync``), gets the original's
mode (and owner, where permitted), and only then is renamed over the original — a rename
within one filesystem is atomic, so a reader sees the old file or the new one, never a mix.
On any error the temporary files are removed and the originals are untouched.

:class:`Staging` stages several files first and renames them all at the end, so
``apply_patch`` is all-or-nothing even when the disk fills on its last file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from dataclasses import field
from pathlib import Path

from nexus._dataclass import dataclass
from nexus._replace_file import process_umask
from nexus.tools._workspace import ToolError, refuse_hard_link

_TMP_SUFFIX = ".nexus-tmp"
_BAK_SUFFIX = ".nexus-bak"


def check_target(path: Path, shown: str, tool: str) -> None:
    """Raise :class:`ToolError` unless ``path`` is absent or a regular file with one hard link.

    A hard link is the same file under another name, possibly outside the workspace: changing it
    in place would change that file too, and replacing it would silently split the two names.
    A pipe, socket or device is never replaced by a regular file.
    """
    try:
        st = path.stat()
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is not a regular file (a pipe, socket or device); {tool} only changes files.")
    refuse_hard_link(st, shown, tool, "change")


def describe(exc: OSError) -> str:
    """``No space left on device (ENOSPC)`` — the reason of an OS error in one phrase."""
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


@dataclass(slots=True)
class Staging:
    """Files written to temporaries, renamed over their targets by :meth:`commit` (or removed by :meth:`discard`)."""

    staged: list[tuple[Path, Path]] = field(default_factory=list)
    """(temporary, target) pairs in staging order."""
    removals: list[Path] = field(default_factory=list)
    """Files :meth:`commit` deletes."""
    unrestored: list[Path] = field(default_factory=list)
    """After a failed :meth:`commit`: files already changed that could not be put back (no backup)."""

    def stage(self, target: Path, data: bytes, *, executable: bool = False) -> None:
        """Write ``data`` to a synced temporary next to ``target`` with ``target``'s mode and owner.

        A new file gets the mode a plain ``open()`` would give it (0666 minus the umask);
        ``executable`` adds the execute bits (git's mode 100755). Raises ``OSError``.
        """
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            old: os.stat_result | None = target.stat()
        except FileNotFoundError:
            old = None
        if old is not None and not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only", str(target))
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~process_umask()
        if executable:
            mode |= 0o111
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=_TMP_SUFFIX, dir=target.parent)
        tmp = Path(tmp_name)
        self.staged.append((tmp, target))
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(OSError):  # only root may give a file away; keep ours then
                    os.fchown(fd, old.st_uid, old.st_gid)
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self, target: Path) -> None:
        """Delete ``target`` in :meth:`commit`, with the renames (and undone with them if one fails)."""
        self.removals.append(target)

    def commit(self) -> None:
        """Rename every temporary over its target and delete the removals, all or nothing.

        Each original is first kept under a hidden backup name (a hard link; removals are renamed
        to it), so when a later rename fails — an append-only or immutable file, EIO — the files
        already replaced get their originals back before the ``OSError`` propagates. A file whose
        backup could not be made cannot be put back: it is listed in :attr:`unrestored`.
        """
        done: list[tuple[Path, Path | None, bool]] = []  # (target, its backup, whether it existed)
        several = len(self.staged) + len(self.removals) > 1  # one file alone needs no undo: its rename is atomic
        try:
            for tmp, target in self.staged:
                existed = os.path.lexists(target)
                backup = _backup(target, keep=True) if several and existed else None
                try:
                    os.replace(tmp, target)
                except OSError:
                    _unlink(backup)
                    raise
                done.append((target, backup, existed))
            for target in self.removals:
                backup = _backup(target, keep=False)
                if backup is not None:
                    done.append((target, backup, True))
        except OSError:
            self.unrestored = _roll_back(done)
            raise
        for _, backup, _ in done:
            _unlink(backup)
        for directory in {target.parent for target, _, _ in done}:
            _fsync_dir(directory)
        self.staged.clear()
        self.removals.clear()

    def discard(self) -> None:
        """Remove every temporary still staged (the targets are untouched)."""
        for tmp, _ in self.staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self.staged.clear()
        self.removals.clear()


def _backup(target: Path, *, keep: bool) -> Path | None:
    """A hidden second name for ``target`` (a hard link if ``keep``, else ``target`` renamed); None if absent.

    The hard link is best effort: where it is refused (no hard links on this filesystem,
    ``protected_hardlinks``, an append-only file) that one file cannot be put back, and an
    append-only file then fails its own rename, which undoes the others. A refused rename raises.
    """
    if not keep and not os.path.lexists(target):
        return None
    backup = target.with_name(f".{target.name}.{os.urandom(4).hex()}{_BAK_SUFFIX}")
    try:
        if keep:
            os.link(target, backup)
        else:
            os.rename(target, backup)
    except FileNotFoundError:
        return None
    except OSError:
        if keep:
            return None
        raise
    return backup


def _roll_back(done: list[tuple[Path, Path | None, bool]]) -> list[Path]:
    """Put every original in ``done`` back (newest first); returns the files that could not be."""
    unrestored: list[Path] = []
    for target, backup, existed in reversed(done):
        try:
            if backup is not None:
                os.replace(backup, target)
            elif not existed:
                target.unlink()
            else:
                unrestored.append(target)
        except OSError:
            unrestored.append(target)
    return unrestored


def _unlink(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable; best effort (some filesystems refuse to sync a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_file(path: Path, data: bytes, shown: str) -> None:
    """Atomically give ``path`` the content ``data``; a :class:`ToolError` says the original is untouched."""
    existed = path.exists()
    staging = Staging()
    try:
        staging.stage(path, data)
        staging.commit()
    except OSError as exc:
        staging.discard()
        kept = "the original file is unchanged" if existed else "no file was created"
        raise ToolError(f"Could not write {shown}: {describe(exc)}; {kept}.") from None
