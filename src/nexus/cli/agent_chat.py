"""``nexus chat --agent ID``: talk to a named agent through the broker, one durable message per line.

Each line goes to the agent's queue (so it is kept even if the chat is killed) and runs as a
turn of the agent's session, with the agent's model, tools and instructions — including the
agent tools, so a manager can delegate while you wait. Ctrl-C during a reply aborts that turn
(kept as ``aborted``); Ctrl-C at the prompt or end of input leaves. This process drains the
conversation unless another process holds the broker lock; then it waits for that broker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, TextIO

from nexus.cli._input import accept_text, lenient_stdin

if TYPE_CHECKING:
    from nexus.broker import AgentBroker

EXIT_OK = 0
EXIT_INTERRUPTED = 130


def agent_chat(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run the chat loop with agent ``args.agent`` until /exit, end of input or Ctrl-C at the prompt."""
    from nexus.broker import running_broker
    from nexus.cli._lock import drain_lock
    from nexus.cli.send_cmd import _check_names, _config, open_recovered
    from nexus.errors import NexusError

    source, sink = stdin or sys.stdin, stdout or sys.stdout
    lenient_stdin(source)
    config = _config(args)
    with drain_lock(config) as held:
        if not held:
            raise NexusError(
                "another process holds the broker lock (a server or a drain): use `nexus send AGENT … --wait` "
                "to talk to the agent through it"
            )

        async def loop() -> int:
            from nexus.broker import AgentMessage, new_message_id

            async with open_recovered(config) as ledger, running_broker(config, ledger, scope={args.agent}) as host:
                _check_names(config, ledger, AgentMessage("check", "user", args.agent, "x"))
                print(f"talking to agent {args.agent} (Ctrl-C stops a reply, Ctrl-D leaves)", file=sys.stderr)
                while True:
                    line = await asyncio.to_thread(_read_line, source)
                    if line is None or line.strip() in ("/exit", "/quit"):
                        return EXIT_OK
                    text = accept_text(line, "in this line")
                    if not text.strip():
                        continue
                    message = AgentMessage(new_message_id(), "user", args.agent, text)
                    await _one_turn(host.broker, message, sink)

        try:
            return asyncio.run(loop())
        except KeyboardInterrupt:
            print("", file=sys.stderr)
            return EXIT_INTERRUPTED


async def _one_turn(broker: AgentBroker, message: object, sink: TextIO) -> None:
    """Send one message and print the reply; Ctrl-C aborts the turn, not the chat."""
    from nexus.broker import AgentMessage

    assert isinstance(message, AgentMessage)
    task = asyncio.get_running_loop().create_task(broker.send_and_wait(message))
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:  # Ctrl-C: asyncio.run cancels the main task
        broker.abort(message.to)
        result = await task
    if result.reply:
        print(result.reply, file=sink, flush=True)
    if not result.success:
        print(f"nexus: {result.error}", file=sys.stderr)


def _read_line(source: TextIO) -> str | None:
    if source.isatty():
        try:
            return input("you> ")
        except EOFError:
            return None
    line = source.readline()
    return None if line == "" else line.rstrip("\n")
