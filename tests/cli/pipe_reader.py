"""A background reader of a child process's pipe, so a test can wait for some of its output."""

from __future__ import annotations

import threading
import time


class PipeReader(threading.Thread):
    """Collects a pipe's output in the background so the test can wait for some of it."""

    def __init__(self, pipe: object) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.data = ""
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            chunk = self.pipe.read(1)  # type: ignore[attr-defined]
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def wait_for(self, needle: str, timeout: float = 30.0) -> bool:
        """True once ``needle`` has appeared in the output, False after ``timeout`` seconds without it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if needle in self.data:
                    return True
            time.sleep(0.02)
        return False
