"""Path confinement: every coding tool resolves the model's paths through one :class:`Workspace`."""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from nexus._lazy import LazyPattern
from nexus.errors import NexusError

_UNICODE_SPACES = LazyPattern("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")


class ToolError(NexusError, ValueError):
    """A tool call the tool refuses (bad arguments, missing file, no match …); the message goes to the model."""


class WorkspaceError(ToolError):
    """A path that resolves outside the workspace root (directly, through ``..`` or through a symlink)."""


class Workspace:
    """One confined directory tree; tools may only touch paths that resolve inside ``root``.

    Paths are taken the way pi takes them (so sessions move between the two): a leading
    ``@`` is dropped (models copy it from file mentions), ``~`` expands to the home
    directory, unicode spaces become plain spaces, relative paths are relative to the
    root. The *real* path (symlinks resolved) must lie inside the real root.
    """

    __slots__ = ("_locks", "root")

    def __init__(self, root: Path | str) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise WorkspaceError(f"Workspace root {str(path)!r} is not a directory; create it first.")
        self.root = Path(os.path.realpath(path))
        self._locks: dict[Path, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str | None) -> Path:
        """The real absolute path for ``path``; raises :class:`WorkspaceError` when it leaves the root."""
        if path is not None and "\x00" in path:
            raise WorkspaceError(f"Path {path!r} contains a NUL character; give a plain file path.")
        text = _UNICODE_SPACES.sub(" ", path or ".").strip()
        if text.startswith("@"):
            text = text[1:]
        if text == "~" or text.startswith("~/"):
            text = str(Path.home()) + text[1:]
        if not text:
            text = "."
        candidate = Path(text) if os.path.isabs(text) else self.root / text
        try:
            real = Path(os.path.realpath(candidate))
        except OSError as exc:  # a name on the path changed under it (a link swapped for a file meanwhile)
            raise WorkspaceError(f"Path {path!r} could not be resolved ({exc.strerror or exc}); try again.") from None
        if real != self.root and not real.is_relative_to(self.root):
            raise WorkspaceError(
                f"Path {path!r} resolves to {str(real)!r}, outside the workspace root {str(self.root)!r}; "
                "use a path inside the workspace."
            )
        return real

    def open_inside(self, path: Path, shown: str) -> BinaryIO:
        """Open ``path`` (as :meth:`resolve` gave it) for reading, refusing a file that is no longer inside.

        Between the resolve and the open another process may swap a name on the path for a
        symlink out of the workspace (a shared workspace's other user): the last name is opened
        without following a symlink, and the file actually opened is checked to lie inside the
        root (its path from ``/proc/self/fd``, or ``F_GETPATH``, where the system tells it). A
        pipe swapped in is opened without blocking, then refused by the caller's ``fstat``.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise WorkspaceError(f"{shown} became a symlink while it was opened; it is not read. Try again.") from None
        try:
            real = _opened_path(fd)
            if real is not None and real != self.root and not real.is_relative_to(self.root):
                raise WorkspaceError(
                    f"{shown} was swapped for a file outside the workspace root {str(self.root)!r} while it was "
                    "opened; it is not read."
                )
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def lock(self, path: Path) -> asyncio.Lock:
        """The lock serialising read-modify-write tools on one file.

        The agent runs a batch of tool calls in parallel; two ``edit`` calls on the same file
        would otherwise both read the old content and the second write would drop the first edit.
        """
        lock = self._locks.get(path)
        if lock is None:
            lock = self._locks[path] = asyncio.Lock()
        return lock

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, with ``/`` separators (``.`` for the root itself)."""
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(path)


def _opened_path(fd: int) -> Path | None:
    """The real path of the file open on ``fd``; None where the system cannot tell."""
    try:
        if os.path.isdir("/proc/self/fd"):
            return Path(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"))
        import fcntl

        get_path = getattr(fcntl, "F_GETPATH", None)  # macOS, the BSDs
        if get_path is not None:
            return Path(os.fsdecode(fcntl.fcntl(fd, get_path, bytes(1024)).rstrip(b"\0")))
    except OSError:
        pass
    return None


def refuse_hard_link(found: os.stat_result, shown: str, tool: str, action: str) -> None:
    """Raise :class:`ToolError` when ``found`` (a ``stat`` of the file) is a regular file with several hard links.

    A hard link is the same file under another name, which may be outside the workspace (a link to
    ``~/.ssh/id_ed25519`` planted in it): reading it would show that file, changing it would change
    that file too, and replacing it would silently split the two names. Confinement is by path, so
    no tool reads or changes such a file; ``bash`` can make this name a file of its own.
    """
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
        raise ToolError(
            f"{shown} has {found.st_nlink} hard links (the same file also exists under another name, maybe outside "
            f"the workspace); {tool} refuses to {action} it. To {action} only this name, make it a separate copy "
            f"first with bash: cp -p {shown} {shown}.copy && mv {shown}.copy {shown}"
        )
