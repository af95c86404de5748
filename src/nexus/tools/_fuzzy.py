"""Text indexes for ``edit``: find ``oldText`` in a normalised view, map the hit back to original offsets.

Matching happens on a normalised copy (CRLF → LF, BOM dropped; for the fuzzy pass also
trailing whitespace per line, smart quotes, unicode dashes, special spaces and NFKC), but
the replacement is applied to the *original* text at the mapped span, so every byte
outside the matched span stays as it was.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left, bisect_right

_TRANSLATE = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys(
            "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "
        ),
    }
)


class ExactIndex:
    """The file with BOM dropped and CRLF read as LF; ``span`` maps a hit back to the original."""

    __slots__ = ("_bom", "_crlf_nl", "text")

    def __init__(self, original: str) -> None:
        self._bom = 1 if original.startswith("\ufeff") else 0
        body = original[self._bom :]
        self._crlf_nl: list[int] = []
        if "\r" in body and "\r\n" in body:
            pos = body.find("\r\n")
            while pos != -1:
                # index of this CRLF's "\n" in the normalised text
                self._crlf_nl.append(pos - len(self._crlf_nl))
                pos = body.find("\r\n", pos + 2)
            body = body.replace("\r\n", "\n")
        self.text = body

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original ``[start, end)`` for normalised ``[start, end)``."""
        return (
            start + bisect_left(self._crlf_nl, start) + self._bom,
            end + bisect_left(self._crlf_nl, end) + self._bom,
        )


def _clusters(line: str) -> list[tuple[int, int]]:
    """(start, end) of each base character with its combining marks, so NFKC can compose them."""
    out: list[tuple[int, int]] = []
    for i, ch in enumerate(line):
        if out and unicodedata.combining(ch):
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _norm_pieces(line: str) -> tuple[str, list[tuple[int, int, int]]]:
    """Fuzzy-normalised ``line`` plus (norm_offset, orig_start, orig_end) per piece (non-ASCII lines)."""
    pieces: list[tuple[str, int, int]] = []
    for s, e in _clusters(line):
        pieces.append((unicodedata.normalize("NFKC", line[s:e]).translate(_TRANSLATE), s, e))
    while pieces and (pieces[-1][0] == "" or pieces[-1][0].isspace()):
        pieces.pop()
    table: list[tuple[int, int, int]] = []
    parts: list[str] = []
    at = 0
    for norm, s, e in pieces:
        if norm:
            table.append((at, s, e))
            parts.append(norm)
            at += len(norm)
    return "".join(parts), table


def normalize_fuzzy(text: str) -> str:
    """The fuzzy form of ``text`` (used for ``oldText``)."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    return "\n".join(line.rstrip() if line.isascii() else _norm_pieces(line)[0] for line in lines)


class FuzzyIndex:
    """The fuzzy-normalised file; per-character maps are built only for the lines a hit touches."""

    __slots__ = ("_lines", "_norm_len", "_norm_starts", "_orig_starts", "text")

    def __init__(self, original: str) -> None:
        self._lines = original.split("\n")
        self._orig_starts: list[int] = []
        self._norm_starts: list[int] = []
        self._norm_len: list[int] = []
        parts: list[str] = []
        o = n = 0
        for i, line in enumerate(self._lines):
            body = line[1:] if i == 0 and line.startswith("\ufeff") else line
            norm = body.rstrip() if body.isascii() else _norm_pieces(body)[0]
            self._orig_starts.append(o + len(line) - len(body))
            self._norm_starts.append(n)
            self._norm_len.append(len(norm))
            parts.append(norm)
            o += len(line) + 1
            n += len(norm) + 1
        self.text = "\n".join(parts)

    def _char(self, n: int) -> tuple[int, int]:
        """Original (start, end) of the characters that produced normalised character ``n``."""
        i = bisect_right(self._norm_starts, n) - 1
        off = n - self._norm_starts[i]
        base = self._orig_starts[i]
        line = self._lines[i]
        body = line[1:] if i == 0 and line.startswith("\ufeff") else line
        ascii_line = body.isascii()
        table = [] if ascii_line else _norm_pieces(body)[1]
        if off >= self._norm_len[i]:
            # the line's "\n" stands for the stripped trailing whitespace (and CR) plus the "\n"
            content_end = len(body.rstrip()) if ascii_line else (table[-1][2] if table else 0)
            return base + content_end, base + len(body) + 1
        if ascii_line:
            return base + off, base + off + 1
        k = bisect_right([t[0] for t in table], off) - 1
        return base + table[k][1], base + table[k][2]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original ``[start, end)`` covering normalised ``[start, end)`` (``end > start``)."""
        return self._char(start)[0], self._char(end - 1)[1]
