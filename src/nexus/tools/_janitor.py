"""What the ``bash`` tool leaves behind in one ``nexus`` process: call marks, full-output files, the reaper.

One :class:`Janitor` per OS process (it is about this process's children and temp files, like
the HTTP client is about its connections), created on the first bash call. It owns

- the instance id in every call's mark (see :mod:`nexus.tools._reaper`);
- the directory of full-output files, ``$TMPDIR/nexus-bash-<instance>/``: at most
  :data:`MAX_SPILL_FILES` newest files are kept, and the directory is removed when the process
  ends — at exit, or by the reaper when the process is killed;
- the reaper process, which ends the calls' processes if this one dies without doing it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

MAX_SPILL_FILES = 20
"""Full-output files kept per process (oldest removed first): a long-lived broker must not fill /tmp."""
_REAPER = Path(__file__).with_name("_reaper.py")


class Janitor:
    """See the module doc; use :func:`janitor` for this process's instance."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.instance = uuid.uuid4().hex[:12]
        self._count = itertools.count(1)
        self._lock = threading.Lock()
        # created on first use, so a full /tmp never fails a bash call that needs no file
        self.spill_dir = Path(tempfile.gettempdir()) / f"nexus-bash-{self.instance}"
        self._reaper = self._start_reaper()
        atexit.register(self.close)

    def _start_reaper(self) -> subprocess.Popen[bytes] | None:
        if not sys.executable or not Path("/proc/self").exists():
            return None
        try:
            return subprocess.Popen(
                [sys.executable, "-E", "-s", "-S", str(_REAPER), self.instance, str(self.spill_dir)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in the terminal must not stop it before it has done its job
                cwd="/",
            )
        except OSError:
            return None

    def token(self) -> str:
        """A new call mark, ``<instance>.<n>``."""
        with self._lock:
            return f"{self.instance}.{next(self._count)}"

    def spill_file(self) -> tuple[int, str]:
        """A new full-output file (fd, path); the oldest files beyond :data:`MAX_SPILL_FILES` are removed."""
        with self._lock:
            self.spill_dir.mkdir(mode=0o700, exist_ok=True)
            if self.spill_dir.stat().st_uid != os.getuid():
                raise PermissionError(errno.EPERM, "the output directory belongs to another user", str(self.spill_dir))
            fd, path = tempfile.mkstemp(prefix="output-", suffix=".log", dir=self.spill_dir)
            files = sorted(self.spill_dir.iterdir(), key=lambda p: p.stat().st_mtime_ns if p.exists() else 0)
            for old in files[: max(0, len(files) - MAX_SPILL_FILES)]:
                if str(old) != path:
                    old.unlink(missing_ok=True)
            return fd, path

    def close(self) -> None:
        """At exit: remove the output directory and let the reaper go (nothing is left for it to end)."""
        shutil.rmtree(self.spill_dir, ignore_errors=True)
        reaper, self._reaper = self._reaper, None
        if reaper is not None and reaper.stdin is not None:
            with contextlib.suppress(OSError):
                reaper.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                reaper.wait(timeout=5)


_janitor: Janitor | None = None
_janitor_lock = threading.Lock()


def janitor() -> Janitor:
    """This process's :class:`Janitor` (started on first use; a forked child starts its own)."""
    global _janitor
    with _janitor_lock:
        if _janitor is None or _janitor.pid != os.getpid():
            _janitor = Janitor()
        return _janitor
