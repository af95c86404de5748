"""What a checkpoint is about, derived from its turn: the request, the reply's gist, the files touched.

The index never stores a turn's messages again (the ledger has them): it keeps the short texts it
searches — in a contentless FTS5 table and as an embedding — and one human line, ``context``, that a
:class:`~nexus.routing.types.Checkpoint` shows. Files come from the arguments of the coding tools
(``read``, ``write``, ``edit``, ``apply_patch``); they are the facets the scorer matches a task's words
against and the paths whose freshness it checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nexus._dataclass import dataclass
from nexus.llm import AssistantMessage, Message, TextContent, ToolCall, UserMessage

ASK_CHARS = 1200
REPLY_CHARS = 400
CONTEXT_CHARS = 240
MAX_FILES = 24

_PATH_TOOLS = {"read": "read", "write": "wrote", "edit": "wrote", "multi_edit": "wrote"}
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
_SPACES = re.compile(r"[\s\x00]+")
"""Runs of white space, and NULs: a turn may hold one (the ledger keeps it, JSON-escaped), but PostgreSQL's
text columns of the index cannot, and one such turn failed every later decision there."""


@dataclass(frozen=True, slots=True)
class TurnText:
    """The searchable texts of one turn."""

    ask: str
    reply: str
    files: tuple[str, ...]
    wrote: tuple[str, ...]
    tool_errors: int

    @property
    def context(self) -> str:
        """One line for people: the request, and the reply's gist after a dash."""
        ask = _clip(self.ask, CONTEXT_CHARS)
        reply = _clip(self.reply, CONTEXT_CHARS)
        return f"{ask} — {reply}" if reply else ask

    def embedding_text(self) -> str:
        """What the embedder reads: the request first (it says what the work is), then the reply and files.

        Not the turns before it: what a turn continues is scored from its ancestors among the candidates
        (``nexus.routing._scoring``), so a turn about other work does not borrow their words."""
        return "\n".join(p for p in (self.ask, self.ask, self.reply, " ".join(self.files)) if p)


def turn_text(messages: Sequence[Message]) -> TurnText:
    """Derive the texts of a turn from its messages (query first, as the ledger stores them)."""
    asks: list[str] = []
    reply = ""
    files: dict[str, None] = {}
    wrote: dict[str, None] = {}
    errors = 0
    for message in messages:
        if isinstance(message, UserMessage):
            asks.append(_without_event_context(_plain(message.content)))
        elif isinstance(message, AssistantMessage):
            text = "".join(b.text for b in message.content if isinstance(b, TextContent)).strip()
            if text:
                reply = text
            for block in message.content:
                if isinstance(block, ToolCall):
                    _collect_paths(block, files, wrote)
        elif getattr(message, "is_error", False):
            errors += 1
    ask = _clip(_SPACES.sub(" ", " ".join(asks)).strip(), ASK_CHARS)
    return TurnText(
        ask, _clip(_SPACES.sub(" ", reply), REPLY_CHARS), tuple(files)[:MAX_FILES], tuple(wrote)[:MAX_FILES], errors
    )


def _without_event_context(text: str) -> str:
    """The user's own words: the engine puts an ``[Event context]`` block (time, channel, sender) before them
    for the model; its timestamp would make every checkpoint text unique noise."""
    head, marker, rest = text.partition("[/Event context]")
    return rest.strip() if marker and head.lstrip().startswith("[Event context]") else text


def _plain(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.text for b in content if isinstance(b, TextContent))
    return ""


def _collect_paths(call: ToolCall, files: dict[str, None], wrote: dict[str, None]) -> None:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    kind = _PATH_TOOLS.get(call.name)
    path = args.get("path") or args.get("file_path")
    if kind is not None and isinstance(path, str) and path.strip() and "\x00" not in path:  # no file has a NUL
        files[path.strip()] = None
        if kind == "wrote":
            wrote[path.strip()] = None
    elif call.name == "apply_patch" and isinstance(args.get("patch"), str):
        for match in _PATCH_PATH.finditer(str(args["patch"])):
            found = (match.group(1) or match.group(2) or "").strip()
            if found and found != "/dev/null" and "\x00" not in found:
                files[found] = None
                wrote[found] = None


def _clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters (an ellipsis says it was cut)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + "…"
