"""What the in-process model is doing before its first token: loading the weights, reading the prompt.

On a laptop CPU the first reply of a local model can take seconds with nothing on the
screen (the GGUF is loaded, then the whole prompt is evaluated before any token appears),
which looks like a hang. The provider reports those phases to a *progress reporter*; the
library installs none (an embedding application decides what to show), the ``nexus`` CLI
installs :class:`TerminalProgress`, which shows them on stderr only when stderr is a
terminal, as one line that is cleared when the reply starts (pipes and logs stay clean).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TextIO

__all__ = ["ProgressReporter", "TerminalProgress", "report_progress", "set_progress_reporter"]

ProgressReporter = Callable[[str], None]
"""Called (from the generation thread) with a short status such as ``loading …``; ``""`` = done."""

_lock = threading.Lock()
_reporter: list[ProgressReporter] = []


def set_progress_reporter(reporter: ProgressReporter | None) -> None:
    """Install the process's reporter of local-model progress (``None`` removes it).

    Process-wide on purpose: the model itself is loaded once per process and shared.
    """
    with _lock:
        _reporter.clear()
        if reporter is not None:
            _reporter.append(reporter)


def report_progress(status: str) -> None:
    """Tell the installed reporter (if any) what the model is doing; a failing reporter is ignored."""
    with _lock:
        reporter = _reporter[0] if _reporter else None
    if reporter is None:
        return
    try:
        reporter(status)
    except Exception:  # progress display must never break a generation
        pass


class TerminalProgress:
    """Shows the status as one line on ``stream`` when it is a terminal, rewritten in place and cleared at the end."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(isatty()) if callable(isatty) else False

    def __call__(self, status: str) -> None:
        """Replace the line with ``status``, or clear it when ``status`` is empty."""
        if not self.enabled or (not status and not self.shown):
            return
        self.stream.write("\r\x1b[2K" + (f"⋯ {status}" if status else ""))
        self.stream.flush()
        self.shown = bool(status)
