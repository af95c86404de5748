"""``nexus run | head``: when stdout's reader goes away, the run stops like any Unix filter's output.

Only stdlib imports (and :mod:`nexus.cli._render`'s interface): loaded on every run.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from nexus.cli._render import Renderer, RunStart, RunSummary

__all__ = ["ClosedOutputGuard", "is_closed_pipe", "silence_stdout"]


def is_closed_pipe(exc: BaseException) -> bool:
    """True for the error a write raises when the reader went away (``nexus run | head``)."""
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


def silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout fd (embedded, tests): nothing to protect
        pass


class ClosedOutputGuard(Renderer):
    """Wraps a renderer: when stdout's reader goes away, calls ``on_closed`` once and goes quiet.

    Writing to a closed pipe raises ``BrokenPipeError`` inside an engine callback, where the
    engine would log it and carry on. Like any Unix filter, ``nexus`` should instead stop:
    ``on_closed`` aborts the run (the turn is recorded ``aborted`` with what was produced),
    and every later call is dropped.
    """

    def __init__(self, inner: Renderer, on_closed: Callable[[], object]) -> None:
        self.inner = inner
        self.closed = False
        self._on_closed = on_closed

    def _call(self, method: Callable[..., object], *args: Any) -> None:
        if self.closed:
            return
        try:
            method(*args)
        except OSError as exc:
            if not is_closed_pipe(exc):
                raise
            self.closed = True
            silence_stdout()
            self._on_closed()

    def start(self, info: RunStart) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.start, info)

    def text(self, delta: str) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.text, delta)

    def reasoning(self, delta: str) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.reasoning, delta)

    def message_end(self) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.message_end)

    def tool_start(self, call_id: str, name: str, args: Mapping[str, Any]) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.tool_start, call_id, name, args)

    def tool_end(self, call_id: str, name: str, result: object, is_error: bool) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.tool_end, call_id, name, result, is_error)

    def notice(self, kind: str, text: str, data: Mapping[str, Any]) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.notice, kind, text, data)

    def error(self, message: str, kind: str | None = None) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.error, message, kind)

    def finish(self, summary: RunSummary) -> None:
        """Forwarded unless the output is closed."""
        self._call(self.inner.finish, summary)
