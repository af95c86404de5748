"""Reading an adapter's output lines: a line over the limit is skipped whole, and refusals are logged sparingly.

``asyncio.StreamReader.readline`` drops only what it buffered of an overlong line and raises;
the next call then returns the line's tail as if it were a line of its own (a 100 MB line
became a "line" of its last few hundred KB). :func:`read_line` reads on to the newline and
reports the whole line as too long instead.
"""

from __future__ import annotations

import asyncio

LOG_FIRST = 5


async def read_line(stream: asyncio.StreamReader) -> bytes | None:
    """The next line (``b""`` at the end), or ``None`` for a line longer than the reader's limit (skipped whole)."""
    try:
        return await stream.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:  # the end: the last line may lack its newline
        return exc.partial
    except asyncio.LimitOverrunError as exc:
        await _skip_rest(stream, exc.consumed)
        return None


async def _skip_rest(stream: asyncio.StreamReader, buffered: int) -> None:
    """Drop the ``buffered`` bytes of an overlong line and everything up to its newline (or the end)."""
    while True:
        await stream.readexactly(buffered)
        try:
            await stream.readuntil(b"\n")
            return
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError as exc:
            buffered = exc.consumed


def worth_logging(count: int) -> bool:
    """The first few bad lines, then the 10th, 100th, 1000th…: a flood of millions logs a dozen lines.

    (Every thousandth was still thousands of warnings on the user's terminal in the 30 s before
    a flooding adapter is timed out.)
    """
    if count <= LOG_FIRST:
        return True
    while count % 10 == 0:
        count //= 10
    return count == 1
