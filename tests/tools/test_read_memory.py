"""``read`` and ``grep`` cost memory in proportion to what they show, not to the file (issue 8, item 19).

``read`` used to load, decode and split the whole file (~6x its size in RSS), the pure-Python
grep the same (~3.5x). Each test runs the tool in a fresh child process on a generated
file and compares the child's peak RSS (``ru_maxrss``) with the same child doing everything
but the call; the bound is in MB of window, far below the file size.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nexus.agent.output_limits import MAX_BYTES, MAX_LINES, format_size, truncate_head
from nexus.tools import Workspace, read_tool

from ._helpers import call, text_of

SRC = Path(__file__).resolve().parents[2] / "src"
FILE_MB = 96
LINE = b"%09d the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.\n"
HEADROOM_MB = 40
"""Allowed growth over the idle child: the window (≤ 50 KB), read buffers, the event loop; far below FILE_MB."""

_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from nexus.llm.abort import AbortSignal
    from nexus.tools import Workspace, grep_tool, read_tool

    ws = Workspace(sys.argv[1])
    tools = {"read": read_tool(ws), "grep": grep_tool(ws, use_ripgrep=False)}
    args = json.loads(sys.argv[3])

    async def main() -> None:
        if sys.argv[2] != "idle":
            result = await tools[sys.argv[2]].execute("c", args, AbortSignal(), lambda _r: None)
            assert not result.is_error, result
            print(json.dumps([b.text for b in result.content]), file=sys.stderr)

    asyncio.run(main())
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"self_mb": self_kb / 1024, "children_mb": children_kb / 1024}))
    """
)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bigws")
    lines = FILE_MB * 1024 * 1024 // len(LINE % 0)
    with open(root / "big.txt", "wb") as fh:
        for start in range(0, lines, 10_000):
            fh.write(b"".join(LINE % i for i in range(start, min(lines, start + 10_000))))
    return root


def _peak(root: Path, tool: str, args: dict[str, object]) -> dict[str, float]:
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), tool, json.dumps(args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
        check=True,
    )
    peak: dict[str, float] = json.loads(res.stdout)
    return peak


@pytest.mark.slow
def test_read_window_memory_follows_the_window_not_the_file(big_file: Path) -> None:
    idle = _peak(big_file, "idle", {})
    middle = _peak(big_file, "read", {"path": "big.txt", "offset": 500_000, "limit": 100})
    whole = _peak(big_file, "read", {"path": "big.txt"})  # the default window: 2000 lines / 50 KB
    for peak in (middle, whole):
        assert peak["self_mb"] - idle["self_mb"] < HEADROOM_MB, (idle, peak)


@pytest.mark.slow
def test_pure_python_grep_memory_follows_the_matches_not_the_file(big_file: Path) -> None:
    idle = _peak(big_file, "idle", {})
    peak = _peak(big_file, "grep", {"pattern": "^000999999 |^001000000 ", "path": "big.txt"})
    assert peak["self_mb"] - idle["self_mb"] < HEADROOM_MB, (idle, peak)
    assert peak["children_mb"] < idle["self_mb"] + HEADROOM_MB, (idle, peak)  # the search process


def _reference(data: bytes, shown: str, offset: int | None, limit: int | None) -> str:
    """The former whole-file algorithm (decode, split, slice, cut): the streaming read must say the same."""
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = (offset or 1) - 1
    if total == 0:
        return "(empty file)"
    if start >= total:
        return f"Offset {offset} is beyond end of file ({total} lines total) in {shown}."
    end = total if limit is None else min(total, start + limit)
    trunc = truncate_head("\n".join(lines[start:end]))
    first = start + 1
    if trunc.first_line_too_long:
        size = format_size(len(lines[start].encode("utf-8")))
        return (
            f"[Line {first} is {size}, exceeds the {format_size(MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shown} | head -c {MAX_BYTES}]"
        )
    out = trunc.content
    if trunc.truncated:
        last = start + trunc.output_lines
        why = f" ({format_size(MAX_BYTES)} limit)" if trunc.truncated_by == "bytes" else ""
        out += f"\n\n[Showing lines {first}-{last} of {total}{why}. Use offset={last + 1} to continue.]"
    elif end < total:
        out += f"\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]"
    return out


def _samples(rng: random.Random) -> list[bytes]:
    pieces = [b"a", b"hello world", b"", b"\r", b"caf\xc3\xa9", b"bad \xff\xfe byte", b"\xe2\x80\x94 dash", b"x" * 300]
    out = [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"\n", b"\n\n", b"one", b"one\n", b"\xef\xbb\xbfbom line\nnext"]
    out.append(b"y" * (MAX_BYTES + 10) + b"\nshort\n")  # first line over the limit
    out.append(b"short\n" + b"z" * (MAX_BYTES - 3) + b"\n")  # the byte limit falls on the second line
    out.append(b"\xff" * (MAX_BYTES // 2 + 5) + b"\n")  # invalid bytes that triple in size when decoded
    out.append(b"".join(b"%d\n" % i for i in range(MAX_LINES + 7)))  # just over the line limit
    for _ in range(40):
        n = rng.randrange(0, 60)
        body = b"\n".join(rng.choice(pieces) * rng.randrange(1, 4) for _ in range(n))
        out.append(body + rng.choice([b"", b"\n", b"\r\n"]))
    return out


async def test_streaming_read_says_exactly_what_the_whole_file_read_said(ws: Workspace) -> None:
    rng = random.Random(8)
    tool = read_tool(ws)
    for i, data in enumerate(_samples(rng)):
        path = ws.root / f"s{i}.txt"
        path.write_bytes(data)
        total = data.count(b"\n") + 2
        for offset, limit in [(None, None), (1, 1), (2, None), (None, 3), (total // 2 or 1, 2), (total, None)]:
            want = _reference(data, path.name, offset, limit)
            args: dict[str, object] = {"path": path.name}
            if offset is not None:
                args["offset"] = offset
            if limit is not None:
                args["limit"] = limit
            try:
                got = text_of(await call(tool, **args))
            except ValueError as exc:  # ToolError: the offset-beyond-end case
                got = str(exc)
            assert got == want, (data[:80], offset, limit)
