"""Markdown → Telegram HTML, and splitting long text into messages of at most 4096 characters.

Telegram's HTML mode knows ``b i s u code pre a`` and needs ``& < >`` escaped. Models write
Markdown, so fenced code becomes ``<pre><code class="language-x">``, inline code ``<code>``,
``**bold**`` ``<b>``, ``*italic*``/``_italic_`` ``<i>``, ``~~strike~~`` ``<s>``, links ``<a>``,
headings bold. Markdown that nests badly can still produce HTML Telegram refuses; the
adapter then sends the plain text (Telegram answers "can't parse entities").
"""

from __future__ import annotations

import html
import re

TELEGRAM_LIMIT = 4096

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})([^\n`]*)\n(.*?)(?:^\1?\2[ \t]*$\n?|\Z)", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_OPEN_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")


def markdown_to_html(text: str) -> str:
    """Telegram HTML for Markdown ``text`` (best effort; see the module docstring)."""
    out: list[str] = []
    pos = 0
    for match in _FENCE.finditer(text):
        out.append(_inline(text[pos : match.start()]))
        lang = match.group(3).strip().split(" ")[0]
        body = html.escape(match.group(4).rstrip("\n"), quote=False)
        attr = f' class="language-{html.escape(lang)}"' if lang else ""
        out.append(f"<pre><code{attr}>{body}</code></pre>\n")
        pos = match.end()
    out.append(_inline(text[pos:]))
    return "".join(out).rstrip("\n")


def _inline(text: str) -> str:
    codes: list[str] = []

    def stash(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _INLINE_CODE.sub(stash, text)
    text = html.escape(text, quote=False)
    text = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    text = _HEADING.sub(lambda m: f"<b>{m.group(1)}</b>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


def best_cut(text: str, limit: int) -> int:
    """Where to end a message of at most ``limit`` characters: paragraph > line > space > hard."""
    if len(text) <= limit:
        return len(text)
    window = text[:limit]
    floor = limit // 3
    for sep in ("\n\n", "\n", " "):
        i = window.rfind(sep)
        if i >= floor:
            return i + len(sep)
    return limit


def split_message(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split Markdown ``text`` into messages whose HTML fits ``limit``; a split fence is closed and reopened."""
    pieces: list[str] = []
    budget = max(64, limit - 64)
    rest = text
    reopen = ""
    while rest:
        size = budget
        while True:
            cut = best_cut(rest, size - len(reopen))
            piece = reopen + rest[:cut]
            opener = _open_fence(piece)
            closed = piece + ("\n" if not piece.endswith("\n") else "") + _marker(opener) if opener else piece
            if len(markdown_to_html(closed)) <= limit or size <= 128:
                break
            size = int(size * 0.8)
        pieces.append(closed)
        rest = rest[cut:]
        reopen = opener + "\n" if opener else ""
    return pieces or [""]


def _marker(opener: str) -> str:
    match = _OPEN_FENCE.fullmatch(opener)
    return (match.group(1) + match.group(2)) if match else "```"


def _open_fence(text: str) -> str:
    """The opening line of a fence left open at the end of ``text`` ('' if none)."""
    marker = ""
    opener = ""
    for line in text.split("\n"):
        if not marker:
            match = _OPEN_FENCE.fullmatch(line)
            if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
                marker, opener = match.group(2), line
        else:
            stripped = line.strip()
            if stripped and set(stripped) == {marker[0]} and len(stripped) >= len(marker):
                marker = opener = ""
    return opener
