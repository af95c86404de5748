"""Property tests of the block chunker: any text, any token sizes, any limits (hypothesis).

- Concatenating the blocks minus the fence lines the chunker inserted gives back the text.
- No block is longer than ``max_chars``.
- No block splits a code fence: parsed on its own, every block ends with its fences closed.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus.streaming.chunker import Block, BlockChunker

_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")

words = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
separators = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", "! ", "? ", "\t", "\n \n", ".\n"])
fence_openers = st.sampled_from(["```", "```py", "~~~", "~~~~ text", "  ```js", "````"])
long_runs = st.text(alphabet="xyz", min_size=20, max_size=300)


@st.composite
def fences(draw: st.DrawFn) -> str:
    opener = draw(fence_openers)
    indent, marker = _OPEN.fullmatch(opener).group(1, 2)  # type: ignore[union-attr]
    body = draw(st.lists(st.one_of(words, long_runs, st.just("")), max_size=30))
    closed = draw(st.booleans())
    closer = f"{indent}{marker}\n" if closed else ""
    return opener + "\n" + "\n".join(body) + ("\n" if body else "") + closer


@st.composite
def texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(words, separators, fences(), long_runs), max_size=80))
    return "".join(parts)


@st.composite
def tokenised(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(texts())
    sizes = draw(st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20))
    if draw(st.booleans()):
        sizes = [draw(st.integers(min_value=1, max_value=5000))]
    tokens: list[str] = []
    pos = 0
    i = 0
    while pos < len(text):
        size = sizes[i % len(sizes)]
        tokens.append(text[pos : pos + size])
        pos += size
        i += 1
    return text, tokens


def run(tokens: list[str], min_chars: int, max_chars: int, flush_every: int = 0) -> list[Block]:
    chunker = BlockChunker(min_chars, max_chars)
    blocks: list[Block] = []
    for i, token in enumerate(tokens, start=1):
        blocks += chunker.push(token)
        if flush_every and i % flush_every == 0:
            blocks += chunker.flush()  # an idle flush in the middle of the stream
    blocks += chunker.flush()
    return blocks


def open_fence_at_end(text: str) -> str | None:
    """The opening line of the fence still open at the end of ``text`` (CommonMark-style), if any."""
    marker: str | None = None
    opener: str | None = None
    for line in text.split("\n"):
        if marker is None:
            match = _OPEN.fullmatch(line)
            if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
                marker, opener = match.group(2), line
        else:
            match = _CLOSE.fullmatch(line)
            if match and match.group(1)[0] == marker[0] and len(match.group(1)) >= len(marker):
                marker = opener = None
    return opener


limits = st.integers(min_value=16, max_value=400).flatmap(
    lambda mx: st.tuples(st.integers(min_value=1, max_value=mx + 50), st.just(mx))
)


@settings(max_examples=400, deadline=None, database=None)
@given(tokenised(), limits, st.integers(min_value=0, max_value=7))
def test_blocks_give_back_the_text_and_respect_the_limit(
    case: tuple[str, list[str]], lim: tuple[int, int], flush_every: int
) -> None:
    text, tokens = case
    min_chars, max_chars = lim
    blocks = run(tokens, min_chars, max_chars, flush_every)
    assert "".join(block.original for block in blocks) == text
    for block in blocks:
        assert len(block.text) <= max_chars, (len(block.text), max_chars)
        assert block.text.startswith(block.reopened) and block.text.endswith(block.closer)
        assert block.original, "no block is made only of inserted fence lines"


@settings(max_examples=400, deadline=None, database=None)
@given(tokenised(), st.integers(min_value=64, max_value=400), st.integers(min_value=0, max_value=7))
def test_no_block_splits_a_code_fence(case: tuple[str, list[str]], max_chars: int, flush_every: int) -> None:
    _, tokens = case
    blocks = run(tokens, max_chars // 2, max_chars, flush_every)
    for index, block in enumerate(blocks):
        assert open_fence_at_end(block.text) is None, f"block {index} ends inside a fence: {block.text!r}"
        if block.reopened:
            previous = blocks[index - 1]
            assert previous.closer, "a reopened fence follows a block that closed it"
            assert open_fence_at_end(block.reopened) == block.reopened.rstrip("\n")


@settings(max_examples=200, deadline=None, database=None)
@given(tokenised(), limits)
def test_token_boundaries_do_not_change_the_blocks(case: tuple[str, list[str]], lim: tuple[int, int]) -> None:
    """The same text pushed whole or in pieces is cut at the same places (no flush in between)."""
    text, tokens = case
    whole = run([text] if text else [], *lim)
    pieces = run(tokens, *lim)
    assert [b.text for b in whole] == [b.text for b in pieces]


def test_a_hard_cut_inside_a_fence_leaves_no_fence_marker_at_the_start_of_the_next_block() -> None:
    """Found by the property above: the line ``xxx````\\n`` inside a fence, too long for a block, was cut just before
    its backticks; the next block began with them on a line of their own, so they closed its reopened fence and
    its closer opened another (``'````\\n````\\n````'``: a block ending inside a fence)."""
    text = "````\naaaaaaaaaaaaaaa. " + "x" * 37 + "````\n"
    blocks = run(list(text), 32, 64)
    assert "".join(block.original for block in blocks) == text
    for block in blocks:
        assert open_fence_at_end(block.text) is None, [b.text for b in blocks]
        assert len(block.text) <= 64


def test_a_cut_after_a_space_leaves_no_fence_marker_at_the_start_of_the_next_block() -> None:
    """The same for a break at a space: ``see ```python`` in running text is not a fence, at a line start it is."""
    text = "word " * 10 + "```python and more words after it to pass the limit\n"
    blocks = run([text], 20, 64)
    assert "".join(block.original for block in blocks) == text
    for block in blocks:
        assert open_fence_at_end(block.text) is None, [b.text for b in blocks]
