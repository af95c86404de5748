"""SIGTERM for the commands that run the broker in this process (``nexus send``, ``nexus queue drain``).

Python's default SIGTERM ends the process where it stands: a run in flight was left as an open turn, closed
later by the next command's ``recover()`` as if the process had been killed, and the reply streamed so far was
kept only as far as the crash journal had it. Ctrl-C already stopped these commands cleanly (``asyncio.run``
cancels the main task: the broker's close aborts its runs and writes them as ``aborted`` turns with their
partial replies, queued messages stay queued). :func:`run_terminable` makes SIGTERM do the same, and the
command then exits 143 (``nexus: terminated``), as ``nexus run`` does. A second SIGTERM ends the process at once.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Terminated(Exception):
    """The command was stopped by SIGTERM, after its runs were aborted and written (the CLI exits 143)."""


def run_terminable(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, where SIGTERM cancels ``main`` as Ctrl-C does and then raises :class:`Terminated`."""
    import asyncio
    import signal

    stopped = False

    async def guarded() -> T:
        nonlocal stopped
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_sigterm() -> None:
            nonlocal stopped
            stopped = True
            loop.remove_signal_handler(signal.SIGTERM)  # back to the default: a second SIGTERM ends the process
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await main
        finally:
            if not stopped:
                loop.remove_signal_handler(signal.SIGTERM)

    try:
        result = asyncio.run(guarded())
    except asyncio.CancelledError:
        if stopped:
            raise Terminated from None
        raise
    if stopped:  # the command caught the cancellation and returned: it still stopped for SIGTERM
        raise Terminated
    return result
