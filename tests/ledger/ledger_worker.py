"""A child process for the crash and concurrency tests (run as a script, killed or raced by the test).

Modes:
  open-and-hang DB SESSION           open a turn, journal two tool calls, print "ready", sleep
  write-loop DB SESSION BYTES        forever: open a turn, journal a call, print "writing", write a big turn,
                                     print its id
  writer DB SESSION COUNT            write COUNT turns to its own session, print "done N"
  racer DB SESSION COUNT             COUNT times: read head, write a turn on it; retry on HeadMovedError
"""

from __future__ import annotations

import sys
import time

from nexus.ledger import HeadMovedError, JournalToolCall, Ledger, TurnDetails, TurnOpen, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage, now_ms


def _call(i: int, size: int) -> tuple[ToolCall, ToolResultMessage]:
    call = ToolCall(f"c{i}", "read", {"path": f"{i}.txt"})
    return call, ToolResultMessage(f"c{i}", "read", [TextContent(f"r{i} " * (size // 4 + 1))])


def _reply(text: str) -> AssistantMessage:
    return AssistantMessage([TextContent(text)], provider="p", model="m", usage=Usage(10, 5, total=15))


def open_and_hang(ledger: Ledger, session: str) -> None:
    turn = run_inline(
        ledger.turns.open(TurnOpen(session, [UserMessage("will be killed")], TurnDetails(model="m", provider="p")))
    )
    for i in range(2):
        call, result = _call(i, 20)
        run_inline(ledger.turns.journal([JournalToolCall(turn, call, result, now_ms(), now_ms())]))
    print("ready", turn, flush=True)
    time.sleep(600)


def write_loop(ledger: Ledger, session: str, size: int) -> None:
    i = 0
    while True:
        i += 1
        turn = run_inline(
            ledger.turns.open(TurnOpen(session, [UserMessage(f"q{i}")], TurnDetails(model="m", provider="p")))
        )
        call, result = _call(i, size)
        run_inline(ledger.turns.journal([JournalToolCall(turn, call, result, now_ms(), now_ms())]))
        assistant = AssistantMessage([call], provider="p", model="m", stop_reason="tool_use")
        print("writing", flush=True)
        run_inline(
            ledger.turns.write(
                TurnWrite(session, turn, response_messages=[assistant, result, _reply(f"a{i}" * (size // 8))])
            )
        )
        print(turn, flush=True)


def writer(ledger: Ledger, session: str, count: int) -> None:
    for i in range(count):
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    session, None, query_messages=[UserMessage(f"{session}-{i}")], response_messages=[_reply(f"r{i}")]
                )
            )
        )
    print("done", count, flush=True)


def racer(ledger: Ledger, session: str, count: int) -> None:
    written = conflicts = 0
    while written < count:
        head = run_inline(ledger.sessions.head(session))
        try:
            run_inline(
                ledger.turns.write(
                    TurnWrite(
                        session,
                        None,
                        query_messages=[UserMessage(f"q{written}")],
                        response_messages=[_reply("r")],
                        parent_turn_id=None if head is None else head.id,
                    )
                )
            )
            written += 1
        except HeadMovedError:
            conflicts += 1
    print("done", written, conflicts, flush=True)


def main() -> None:
    mode, db, session = sys.argv[1], sys.argv[2], sys.argv[3]
    ledger = Ledger.open(db)
    if mode == "open-and-hang":
        open_and_hang(ledger, session)
    elif mode == "write-loop":
        write_loop(ledger, session, int(sys.argv[4]))
    elif mode == "writer":
        writer(ledger, session, int(sys.argv[4]))
    elif mode == "racer":
        racer(ledger, session, int(sys.argv[4]))


if __name__ == "__main__":
    main()
