"""``nexus chat``: a conversation in the terminal, one ledger turn per message, with slash commands.

Plain line input (``input()`` with readline editing on a terminal, ``readline()`` from a
pipe), so it needs no TUI library and can be driven by a script: ``printf 'hi\\n/history\\n'
| nexus chat``. Ctrl-C during a reply aborts that reply (kept in the ledger as ``aborted``)
and returns to the prompt; Ctrl-C at the prompt or Ctrl-D (end of input) leaves.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from nexus.cli._conversation import Conversation, check_model, compact_now, open_conversation
from nexus.cli._errors import cli_message, cli_text
from nexus.cli._input import accept_text, lenient_stdin
from nexus.cli._render import TextRenderer, use_color
from nexus.cli._sessions import typed_text
from nexus.cli.run_cmd import EXIT_INTERRUPTED, EXIT_OK, stop_notice
from nexus.errors import ConfigError, NexusError
from nexus.llm import Message, UserMessage

if TYPE_CHECKING:
    from nexus.ledger import Session, Turn

__all__ = ["COMMANDS", "ChatSession", "chat_command"]

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high")

COMMANDS: dict[str, str] = {
    "/help": "show this list",
    "/model [PROVIDER/MODEL]": "show or switch the model (e.g. /model openai/gpt-4o-mini)",
    "/thinking [LEVEL]": f"show or set the reasoning effort ({', '.join(THINKING_LEVELS)})",
    "/session [LABEL]": "show the session, or switch to LABEL (created on its first message)",
    "/fork [TURN_ID]": "new session from the head (or from TURN_ID), and switch to it",
    "/compact [FOCUS]": "summarise the older part of the conversation now (FOCUS: what to keep)",
    "/history [N]": "the last N turns of this session (default 10), with turn ids",
    "/sessions": "list the sessions (* marks the current one)",
    "/exit": "leave (Ctrl-D does the same)",
}
"""The slash commands and what they do (``/help`` prints this)."""


def chat_command(args: argparse.Namespace) -> int:
    """Entry point of ``nexus chat``; returns 0 on /exit or end of input, 130 on Ctrl-C at the prompt."""
    if getattr(args, "agent", None):  # a named agent, through the broker's durable queue
        from nexus.cli.agent_chat import agent_chat

        return agent_chat(args)
    with open_conversation(args) as conversation:
        return ChatSession(conversation).run()


class ChatSession:
    """The read-run loop. ``stdin``/``stdout``/``stderr`` can be replaced (tests, embedding)."""

    def __init__(
        self,
        conversation: Conversation,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.conversation = conversation
        self.stdin = stdin if stdin is not None else sys.stdin
        self.out = stdout if stdout is not None else sys.stdout
        self.err = stderr if stderr is not None else sys.stderr
        self.interactive = bool(getattr(self.stdin, "isatty", lambda: False)()) and self.stdin is sys.stdin
        self._color = use_color(self.err)
        self._readline = False
        self._handlers: dict[str, Callable[[str], int | None]] = {
            "/help": self._help,
            "/model": self._model,
            "/thinking": self._thinking,
            "/session": self._session,
            "/fork": self._fork,
            "/compact": self._compact,
            "/history": self._history,
            "/sessions": self._sessions,
            "/exit": self._exit,
            "/quit": self._exit,
        }

    # ------------------------------------------------------------------ loop

    def run(self) -> int:
        """Read lines until /exit, end of input or Ctrl-C at the prompt."""
        lenient_stdin(self.stdin)  # a stray non-UTF-8 byte becomes U+FFFD (with a note), not a traceback
        if self.interactive:
            try:
                import readline  # noqa: F401  (line editing and history for input())

                self._readline = True
            except ImportError:
                pass
            self._note(
                f"nexus chat · session {self.conversation.session} · model {self.conversation.model} · "
                "/help for commands, Ctrl-D to leave"
            )
        while True:
            try:
                line = self._read_line()
            except KeyboardInterrupt:
                self.err.write("\n")
                return EXIT_INTERRUPTED
            if line is None:
                if self.interactive:
                    self.err.write("\n")
                return EXIT_OK
            line = accept_text(line, "typed", self.err).strip()
            if not line:
                continue
            code = self._command(line) if line.startswith("/") else self._turn(line)
            if code is not None:
                return code

    def _read_line(self) -> str | None:
        if self.interactive:
            try:
                return input(self._prompt())
            except EOFError:
                return None
        line = self.stdin.readline()
        return line if line else None

    def _prompt(self) -> str:
        text = f"{self.conversation.session}> "
        if not self._color:
            return text
        # readline needs the escape codes bracketed (\x01…\x02) to compute the prompt's width
        start, end = ("\x01", "\x02") if self._readline else ("", "")
        return f"{start}\x1b[1m{end}{text}{start}\x1b[0m{end}"

    def _note(self, text: str) -> None:
        self.err.write((f"\x1b[2m{text}\x1b[0m" if self._color else text) + "\n")
        self.err.flush()

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _turn(self, message: str) -> int | None:
        show = self.conversation.thinking not in (None, "off")
        renderer = TextRenderer(self.out, self.err, show_reasoning=show)
        try:
            outcome = self.conversation.run_turn_sync(message, renderer)
        except NexusError as exc:
            self.err.write(f"nexus: error: {cli_message(exc)}\n")
            return None
        summary = outcome.summary
        if outcome.output_closed:
            return 141
        if outcome.terminated:
            return 143
        if outcome.interrupted:
            self._note("(interrupted: the partial reply is kept in the ledger)")
        elif summary is not None and summary.status != "completed":
            self.err.write(f"nexus: run {summary.status}: {cli_text(summary.error or 'unknown error')}\n")
        elif summary is not None and (notice := stop_notice(summary)) is not None:
            self.err.write(f"nexus: {notice}\n")
        return None

    def _command(self, line: str) -> int | None:
        name, _, rest = line.partition(" ")
        handler = self._handlers.get(name.lower())
        if handler is None:
            self.err.write(f"nexus: unknown command {name}; /help lists the commands\n")
            return None
        try:
            return handler(rest.strip())
        except NexusError as exc:
            self.err.write(f"nexus: error: {cli_message(exc)}\n")
            return None

    # ------------------------------------------------------------------ commands

    def _help(self, _: str) -> None:
        width = max(len(name) for name in COMMANDS)
        for name, text in COMMANDS.items():
            self._say(f"  {name.ljust(width)}  {text}")
        self._say("  anything else is sent to the agent; Ctrl-C stops a reply")

    def _exit(self, _: str) -> int:
        return EXIT_OK

    def _model(self, arg: str) -> None:
        if arg:
            from nexus.config import parse_model_ref

            provider, model_id = parse_model_ref(arg, "/model")
            check_model(self.conversation.config, f"{provider}/{model_id}")  # refuse it now, not at the next message
            self.conversation.model = f"{provider}/{model_id}"
        self._say(f"model: {self.conversation.model}")

    def _thinking(self, arg: str) -> None:
        if arg:
            level = arg.lower()
            if level not in THINKING_LEVELS:
                raise ConfigError(f"unknown thinking level {arg!r}: use one of {', '.join(THINKING_LEVELS)}")
            self.conversation.thinking = level
        self._say(f"thinking: {self.conversation.thinking or self.conversation.config.thinking}")

    def _session(self, arg: str) -> None:
        if arg:
            label = shlex.split(arg)[0] if arg[0] in "'\"" else arg.split()[0]
            from nexus.ledger import label_problem

            problem = label_problem(label)  # a new session the API could never address
            if problem is not None and not self.conversation.session_exists(label):
                raise ConfigError(f"/session: {problem}")
            self.conversation.session = label
        label = self.conversation.session
        if self.conversation.session_exists(label):
            turns = self.conversation.wait(self.conversation.ledger.turns.path(label))
            self._say(f"session: {label} ({len(turns)} turn{'s' if len(turns) != 1 else ''})")
        else:
            self._say(f"session: {label} (new: created with its first message)")

    def _fork(self, arg: str) -> None:
        ledger = self.conversation.ledger
        turn_id = arg.split()[0] if arg else None
        if turn_id is None:
            exists = self.conversation.session_exists()
            head = self.conversation.wait(ledger.sessions.head(self.conversation.session)) if exists else None
            if head is None:
                raise ConfigError("nothing to fork yet: this session has no turns (send a message first)")
            turn_id = head.id
        session = self._fork_at(turn_id)
        self.conversation.session = session.label
        self._say(f"forked at {turn_id}: now in session {session.label}")

    def _fork_at(self, turn_id: str) -> Session:
        """Fork by the ledger's one rule (``fork_session``): a turn of this chat's session, named after it
        (``<session>-fork-1``, ``-2``…, the first unused); before the chat's first turn, any turn."""
        from nexus.ledger import fork_session

        conversation = self.conversation
        of = conversation.session if conversation.session_exists() else None
        return conversation.wait(fork_session(conversation.ledger, turn_id, of=of))

    def _compact(self, focus: str) -> None:
        conversation = self.conversation
        if (
            not conversation.session_exists()
            or conversation.wait(conversation.ledger.sessions.head(conversation.session)) is None
        ):
            raise ConfigError("nothing to compact yet: this session has no turns")
        self._note("compacting…")
        line = compact_now(self.conversation, focus or None)
        self._say(line)

    def _history(self, arg: str) -> None:
        count = 10
        if arg:
            try:
                count = int(arg.split()[0])
            except ValueError:
                raise ConfigError(f"/history takes a number of turns, not {arg!r}") from None
            if count <= 0:
                raise ConfigError("/history takes a positive number of turns")
        label = self.conversation.session
        exists = self.conversation.session_exists()
        turns = self.conversation.wait(self.conversation.ledger.turns.path(label)) if exists else []
        if not turns:
            self._say(f"session {label} has no turns yet")
            return
        for turn in turns[-count:]:
            self._print_turn(turn)

    def _print_turn(self, turn: Turn) -> None:
        messages = self.conversation.wait(self.conversation.ledger.turns.messages(turn.id))
        user = next((_text(m.message) for m in messages if m.role == "user"), "")
        reply = next((_text(m.message) for m in reversed(messages) if m.role == "assistant" and _text(m.message)), "")
        tools = f", {turn.tool_call_count} tool call{'s' if turn.tool_call_count != 1 else ''}"
        kind = " compaction" if turn.turn_type == "compaction" else ""
        self._say(f"{turn.id}  {turn.status}{kind}{tools if turn.tool_call_count else ''}")
        if user:
            self._say(f"  you: {_clip(user)}")
        if reply:
            self._say(f"  agent: {_clip(reply)}")

    def _sessions(self, _: str) -> None:
        from nexus.ledger import SessionQuery

        sessions = self.conversation.wait(self.conversation.ledger.sessions.list(SessionQuery(status="active")))
        if not sessions:
            self._say("no sessions yet")
            return
        for session in sessions:
            mark = "*" if session.label == self.conversation.session else " "
            self._say(f"{mark} {session.label}  ({session.origin}, head {session.head_turn_id or '-'})")


def _text(message: Message) -> str:
    if isinstance(message, UserMessage):
        content = message.content
        return typed_text(content if isinstance(content, str) else "".join(getattr(b, "text", "") for b in content))
    return message.text


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
