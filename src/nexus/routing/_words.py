"""The words the lexical index and the facets see: lower case, split on anything not a letter or digit, stemmed.

The stemmer is deliberately small (a handful of English suffix rules) and applied by us on both sides —
to checkpoint texts before they enter FTS5 (whose own tokenizer then only splits on spaces) and to tasks
before they are matched — so the index's vocabulary is exactly ours: document frequencies for a task's
words are a lookup in ``route_vocab``, and "cache", "caching" and "cached" are one word.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")
_VOWELS = set("aeiouy")
MAX_QUERY_TERMS = 32

STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "we",
        "you",
        "i",
        "me",
        "my",
        "our",
        "your",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "do",
        "does",
        "did",
        "done",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "not",
        "no",
        "so",
        "too",
        "very",
        "just",
        "also",
        "again",
        "still",
        "now",
        "let",
        "lets",
        "please",
        "keep",
        "going",
        "continue",
        "carry",
        "work",
        "working",
        "on",
        "up",
        "out",
        "about",
        "into",
        "over",
        "after",
        "before",
        "when",
        "while",
        "what",
        "which",
        "who",
        "how",
        "why",
        "all",
        "any",
        "some",
        "more",
        "most",
        "other",
        "than",
        "only",
        "own",
        "same",
        "such",
        "both",
        "each",
        "few",
        "new",
        "back",
        "get",
        "got",
        "make",
        "made",
        "need",
        "needs",
        "want",
        "wants",
    ]
)


def stem(word: str) -> str:
    """A light English stem: plural, -ing, -ed, -er, a final -e, a doubled final consonant."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed", "er"):
        if (
            word.endswith(suffix)
            and len(word) - len(suffix) >= 4 - (suffix != "er")
            and _has_vowel(word[: -len(suffix)])
        ):
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz" and word[-1] not in _VOWELS:
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _has_vowel(part: str) -> bool:
    return any(ch in _VOWELS for ch in part)


def words(text: str) -> list[str]:
    """Every word of ``text``, stemmed, in order (stop words kept: this is what gets indexed)."""
    return [stem(w) for w in _WORD.findall(text.lower())]


def index_text(text: str) -> str:
    """``text`` as the lexical index stores it: its stemmed words, separated by spaces."""
    return " ".join(words(text))


def query_terms(text: str) -> list[str]:
    """A task's search terms: stemmed, no stop words or single characters, each once, in order (at most 32)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOP:
            seen[stem(word)] = None
    return list(seen)[:MAX_QUERY_TERMS]


def match_expression(terms: list[str]) -> str:
    """An FTS5 query matching any of the terms (each quoted, so no word is read as an operator)."""
    return " OR ".join(f'"{t}"' for t in terms)
