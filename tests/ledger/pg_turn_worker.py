"""A child process for the PostgreSQL turn-write races (run as a script by ``test_postgres_turn_locks``).

Modes (each prints ``done WRITTEN HEAD_MOVED CONFLICTS`` at the end; CONFLICTS: writes the server refused
for a serialization failure or a deadlock and this process ran again, ``PgDatabase.conflicts``):
  racer URL SESSION COUNT     COUNT times: read the head, write a turn on it; HeadMovedError: read again
  writer URL SESSION COUNT    write COUNT turns on the session's head (its own session: nobody races it)
"""

from __future__ import annotations

import asyncio
import sys

from nexus.ledger import HeadMovedError, Ledger, TurnWrite
from nexus.testing.conformance.support import reply, user


async def main(mode: str, url: str, session: str, count: int) -> None:
    async with await Ledger.connect(url) as ledger:
        written = head_moved = 0
        print("ready", flush=True)
        sys.stdin.readline()  # the test starts every process's writes at once
        while written < count:
            write = TurnWrite(
                session, None, query_messages=[user(f"{session}-{written}")], response_messages=[reply("r")]
            )
            if mode == "racer":  # the head it read, or a first turn (a root) when it read none
                head = await ledger.sessions.head(session)
                write.parent_turn_id = None if head is None else head.id
            try:
                await ledger.turns.write(write)
                written += 1
            except HeadMovedError:
                head_moved += 1
        print("done", written, head_moved, ledger.database.conflicts, flush=True)  # type: ignore[attr-defined]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
