"""The ``edit`` tool: replace unique text spans, exactly or fuzzily, touching only the matched bytes."""

from __future__ import annotations

import asyncio
import difflib
import itertools
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.llm import AbortSignal
from nexus.tools._args import req_str
from nexus.tools._atomic import check_target, replace_file
from nexus.tools._diff import unified_diff
from nexus.tools._fuzzy import ExactIndex, FuzzyIndex, normalize_fuzzy
from nexus.tools._specs import declare
from nexus.tools._workspace import ToolError, Workspace


@dataclass(slots=True, frozen=True)
class _Span:
    start: int
    end: int
    new_text: str
    index: int
    fuzzy: bool


def parse_edits(args: dict[str, Any]) -> list[tuple[str, str]]:
    """The (oldText, newText) pairs of a call, from ``oldText``/``newText`` and/or ``edits``."""
    pairs: list[tuple[str, str]] = []
    if args.get("oldText") is not None or args.get("newText") is not None:
        pairs.append((req_str(args, "oldText"), req_str(args, "newText")))
    edits = args.get("edits")
    if edits is not None:
        if not isinstance(edits, list):
            raise ToolError("Argument 'edits' must be an array of {oldText, newText} objects.")
        for i, item in enumerate(edits):
            if not isinstance(item, dict):
                raise ToolError(f"edits[{i}] must be an object with oldText and newText.")
            try:
                pairs.append((req_str(item, "oldText"), req_str(item, "newText")))
            except ToolError as exc:
                raise ToolError(f"edits[{i}]: {exc}") from None
    if not pairs:
        raise ToolError("Give oldText and newText, or edits: [{oldText, newText}, ...].")
    for i, (old, _new) in enumerate(pairs):
        if not old:
            raise ToolError(f"{_label(i, len(pairs))}oldText must not be empty.")
    return pairs


def _label(i: int, n: int) -> str:
    return f"edits[{i}]: " if n > 1 else ""


def _closest_hint(text: str, old: str) -> str:
    wanted = next((line.strip() for line in old.split("\n") if line.strip()), "")
    lines = text.split("\n")[:50_000]
    scored: list[tuple[float, int]] = []
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted)
    for no, line in enumerate(lines, 1):
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
            scored.append((matcher.ratio(), no))
    best = sorted((s for s in scored if s[0] >= 0.5), key=lambda s: (-s[0], s[1]))[:3]
    if not best:
        return ""
    shown = "\n".join(f"  {no}: {lines[no - 1][:200]}" for _, no in sorted(best, key=lambda s: s[1]))
    return f"\nClosest lines in the file:\n{shown}"


def _find(text: str, exact: ExactIndex, fuzzy: list[FuzzyIndex], old: str, i: int, n: int, shown: str) -> _Span:
    needle = old.replace("\r\n", "\n")
    a = exact.text.find(needle)
    # a second find from the first hit scans the rest once; count() only when there are duplicates
    count = 0 if a == -1 else (1 if exact.text.find(needle, a + 1) == -1 else exact.text.count(needle))
    if count == 1:
        s, e = exact.span(a, a + len(needle))
        return _Span(s, e, "", i, False)
    if count == 0:
        if not fuzzy:
            fuzzy.append(FuzzyIndex(text))
        fz = fuzzy[0]
        fneedle = normalize_fuzzy(old)
        count = fz.text.count(fneedle) if fneedle else 0
        if count == 1:
            a = fz.text.find(fneedle)
            s, e = fz.span(a, a + len(fneedle))
            return _Span(s, e, "", i, True)
    if count == 0:
        raise ToolError(
            f"{_label(i, n)}Could not find the text to replace in {shown}. oldText must match exactly, "
            f"including whitespace and line breaks.{_closest_hint(exact.text, needle)}"
        )
    raise ToolError(
        f"{_label(i, n)}Found {count} occurrences of the text in {shown}. The text must be unique: "
        "add more context (surrounding lines) to oldText."
    )


def apply_edits(text: str, pairs: list[tuple[str, str]], shown: str) -> tuple[str, list[_Span]]:
    """The new file text after all ``pairs`` (all or nothing); raises :class:`ToolError` on any problem."""
    exact = ExactIndex(text)
    crlf = text.count("\r\n") if "\r" in text else 0
    eol = "\r\n" if crlf and crlf * 2 > text.count("\n") else "\n"
    fuzzy: list[FuzzyIndex] = []
    spans: list[_Span] = []
    for i, (old, new) in enumerate(pairs):
        found = _find(text, exact, fuzzy, old, i, len(pairs), shown)
        new_text = new.replace("\r\n", "\n")
        if eol != "\n":
            new_text = new_text.replace("\n", eol)
        spans.append(_Span(found.start, found.end, new_text, i, found.fuzzy))
    spans.sort(key=lambda s: s.start)
    for prev, cur in itertools.pairwise(spans):
        if cur.start < prev.end:
            raise ToolError(f"edits[{prev.index}] and edits[{cur.index}] overlap in {shown}; merge them into one edit.")
    parts: list[str] = []
    at = 0
    for span in spans:
        parts.append(text[at : span.start])
        parts.append(span.new_text)
        at = span.end
    parts.append(text[at:])
    new_file = "".join(parts)
    if new_file == text:
        raise ToolError(f"No changes made to {shown}: the replacement produced identical content.")
    return new_file, spans


def _read(path: Path, shown: str) -> str:
    if path.exists() and not path.is_dir() and not path.is_file():  # a FIFO would block forever
        raise ToolError(f"{shown} is not a regular file (a pipe, socket or device); edit only changes files.")
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}.") from None
    except IsADirectoryError:
        raise ToolError(f"{shown} is a directory, not a file.") from None
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; edit refuses to change it (use bash).") from None


def edit_tool(ws: Workspace) -> AgentTool:
    """The ``edit`` tool confined to ``ws``."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        shown = req_str(args, "path", allow_empty=False)
        pairs = parse_edits(args)
        path = ws.resolve(shown)
        async with ws.lock(path):
            text = await asyncio.to_thread(_read, path, shown)
            check_target(path, shown, "edit")
            new_file, spans = await asyncio.to_thread(apply_edits, text, pairs, shown)
            if signal.aborted:
                raise ToolError("Operation aborted; the file was not changed.")
            await asyncio.to_thread(replace_file, path, new_file.encode("utf-8"), shown)
        diff, first = await asyncio.to_thread(unified_diff, text, new_file, ws.rel(path))
        fuzzy = sum(s.fuzzy for s in spans)
        note = f" ({fuzzy} matched after normalising whitespace/quotes/dashes)" if fuzzy else ""
        what = "the text" if len(spans) == 1 else f"{len(spans)} edits"
        return AgentToolResult.text(
            f"Successfully replaced {what} in {shown}{note}.",
            details={"diff": diff, "first_changed_line": first, "edits": len(spans), "fuzzy_matches": fuzzy},
        )

    return declare("edit", execute)
