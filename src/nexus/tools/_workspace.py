"""Path confinement: every coding tool resolves the model's paths through one :class:`Workspace`."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

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
        real = Path(os.path.realpath(candidate))
        if real != self.root and not real.is_relative_to(self.root):
            raise WorkspaceError(
                f"Path {path!r} resolves to {str(real)!r}, outside the workspace root {str(self.root)!r}; "
                "use a path inside the workspace."
            )
        return real

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
