"""A cancellation flag shared by every layer (LLM stream, agent loop, tools, engine).

asyncio task cancellation cannot carry a reason and is easy to swallow by accident;
an explicit signal can be checked, awaited and listened to, and the agent, the
engine and the broker all pass the same object down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncio costs ~30 ms to import; only wait() needs it
    import asyncio


class AbortSignal:
    """Set once by :meth:`abort`; observers poll ``aborted``, ``await wait()`` or add listeners.

    Must be used from the event loop's thread (use ``loop.call_soon_threadsafe`` from others).
    """

    __slots__ = ("_event", "_listeners", "reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._listeners: list[Callable[[], None]] = []
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        """True once :meth:`abort` was called."""
        return self.reason is not None

    def abort(self, reason: str = "aborted") -> None:
        """Raise the flag (idempotent) and run the listeners once."""
        if self.reason is not None:
            return
        self.reason = reason
        if self._event is not None:
            self._event.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` on abort (at once if already aborted); returns a remover."""
        if self.reason is not None:
            listener()
            return _nothing
        self._listeners.append(listener)
        return _Remover(self, listener)

    async def wait(self) -> None:
        """Return when the signal is aborted."""
        if self.reason is not None:
            return
        if self._event is None:
            import asyncio

            self._event = asyncio.Event()
        await self._event.wait()

    def child(self) -> AbortSignal:
        """A signal aborted whenever this one is (but abortable on its own too)."""
        sub = AbortSignal()
        self.add_listener(lambda: sub.abort(self.reason or "aborted"))
        return sub


def _nothing() -> None:
    """The remover of a listener that was called at once (one shared function, not a lambda per call)."""


class _Remover:
    """Takes one listener off its signal: a slotted object, where a closure with its two cells held ~230 bytes
    for as long as the listener was on (each streaming model call adds one)."""

    __slots__ = ("listener", "signal")

    def __init__(self, signal: AbortSignal, listener: Callable[[], None]) -> None:
        self.signal = signal
        self.listener = listener

    def __call__(self) -> None:
        try:
            self.signal._listeners.remove(self.listener)
        except ValueError:  # called already, or the signal fired (its listeners were dropped)
            pass
