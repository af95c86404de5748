"""Replace a file's content the way a user expects of an editor: all at once, and nothing else about it.

Writing a temporary file beside the target and renaming it over the target makes the change atomic,
but renaming replaces whatever the name pointed at. A stranger's trial found three costs of that:
``nexus sessions export -o /dev/full`` (as root) replaced the device with a regular file, a
symlinked ``nexus.toml`` (kept in a dotfiles repository) became a copy that the repository no
longer saw, and a ``nexus.toml`` of mode 0600 holding an API key became 0644 (the temporary file's
mode under umask 022): readable by every local user. So a symlink is followed and its target
replaced; a target that is not a regular file (a device, a FIFO) is written into, never renamed
over (or refused, for a file only a regular file makes sense as); and the new file gets the old
one's mode and owner, or for a new file the mode asked for.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class NotARegularFile(OSError):
    """The name is a device, a FIFO or a socket, and the caller refuses to write into one."""


def replace_file(path: Path, data: str, *, new_mode: int | None = None, into_special: bool = True) -> Path:
    """Make ``data`` the content of ``path`` (symlinks followed); returns the file written.

    ``new_mode``: the mode of a file that did not exist (default: 0666 less the umask, as ``open`` gives).
    ``into_special``: write into a device or FIFO (``-o /dev/stdout``); else :class:`NotARegularFile`.
    OSError as the file system raised it; nothing is left behind.
    """
    target = Path(os.path.realpath(path))
    try:
        found = os.stat(target)
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        if stat.S_ISDIR(found.st_mode):
            raise IsADirectoryError(21, "it is a directory", str(path))
        if not into_special:
            raise NotARegularFile(22, "it is not a regular file (a device, a FIFO or a socket)", str(path))
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(data)
        return target
    mode = stat.S_IMODE(found.st_mode) if found is not None else (new_mode if new_mode is not None else _default_mode())
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if found is not None and (found.st_uid, found.st_gid) != (os.geteuid(), os.getegid()):
                _keep_owner(handle.fileno(), found)
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def _default_mode() -> int:
    """0666 less this process's umask: the mode ``open(..., "w")`` would give a new file."""
    return 0o666 & ~process_umask()


def process_umask() -> int:
    """The process's umask, read without changing it: ``os.umask`` sets it to read it, and a file another
    thread creates in between gets the stand-in mask. Linux tells it in /proc (since 4.7); else 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _keep_owner(fd: int, found: os.stat_result) -> None:
    """The replaced file's owner and group (root editing a user's file); a user who may not is left as owner."""
    try:
        os.fchown(fd, found.st_uid, found.st_gid)
    except PermissionError:
        pass
