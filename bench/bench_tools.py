"""Benchmark: ``edit`` and ``apply_patch`` on a 10 MB file (one-line change near the end).

Baselines: for ``edit``, the floor of read + ``str.replace`` + write in plain Python; for
``apply_patch``, ``git apply`` on the same file and diff (a subprocess, so its start-up is
included, as it would be for an agent shelling out). Both baselines run in every run, so
there is no peer to add: ``--peers`` is accepted (every bench has it) and changes nothing.
Run: ``.venv/bin/python bench/bench_tools.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _machine

from nexus.agent.tool_types import AgentTool
from nexus.llm.abort import AbortSignal
from nexus.tools import Workspace, apply_patch_tool, edit_tool

REPS = 7
LINES = 200_000  # ~10 MB with the line below
TARGET = LINES - 50


def make_file(path: Path) -> None:
    path.write_text("".join(f"line {i:07d}: the quick brown fox jumps over the lazy dog\n" for i in range(LINES)))


def one_line_patch(name: str, old: str, new: str) -> str:
    ctx_before = [f"line {i:07d}: the quick brown fox jumps over the lazy dog" for i in range(TARGET - 3, TARGET)]
    ctx_after = [f"line {i:07d}: the quick brown fox jumps over the lazy dog" for i in range(TARGET + 1, TARGET + 4)]
    body = [f" {c}" for c in ctx_before] + [f"-{old}", f"+{new}"] + [f" {c}" for c in ctx_after]
    return f"--- a/{name}\n+++ b/{name}\n@@ -{TARGET - 2},7 +{TARGET - 2},7 @@\n" + "\n".join(body) + "\n"


def run_tool(tool: AgentTool, args: dict[str, Any]) -> None:
    """One tool call on a fresh event loop (what one agent tool call costs, loop start included)."""

    async def go() -> None:
        await tool.execute("bench", args, AbortSignal(), lambda _u: None)

    asyncio.run(go())


def timed(fn: Callable[[int], Any]) -> float:
    """Median milliseconds of ``fn(i)`` over REPS calls (``i`` lets calls alternate directions)."""
    samples = []
    for i in range(REPS):
        start = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", action="store_true", help="no effect: the baselines run every time")
    args = parser.parse_args()
    print(_machine.header("bench_tools.py: edit and apply_patch on a 10 MB file"))
    if args.peers:
        print("(no peer for this bench: its baselines, plain Python and git apply, are measured in every run)")
    root = Path(tempfile.mkdtemp(prefix="nexus-bench-tools-"))
    try:
        return run(root)
    finally:
        shutil.rmtree(root)
        print(_machine.load_line())


def run(root: Path) -> int:
    ws = Workspace(root)
    big = root / "big.txt"
    make_file(big)
    size_mb = big.stat().st_size / 1e6
    a = f"line {TARGET:07d}: the quick brown fox jumps over the lazy dog"
    b = f"line {TARGET:07d}: the QUICK brown fox jumps over the lazy dog"
    state = {"now": a}

    def flip() -> tuple[str, str]:
        """(current text, the other one); the file alternates between the two versions."""
        old = state["now"]
        state["now"] = b if old == a else a
        return old, state["now"]

    edit = edit_tool(ws)
    patch = apply_patch_tool(ws)

    def ours_edit(i: int) -> None:
        old, new = flip()
        run_tool(edit, {"path": "big.txt", "oldText": old, "newText": new})

    def floor_edit(i: int) -> None:
        old, new = flip()
        text = big.read_text("utf-8")
        if text.count(old) != 1:
            raise SystemExit("floor: unexpected match count")
        big.write_text(text.replace(old, new, 1), "utf-8")

    def ours_fuzzy(i: int) -> None:
        old, new = flip()
        # an NBSP forces the fuzzy pass (the file has none): worst case, normalises the whole file
        old_fuzzy = old.replace("the lazy", "the\u00a0lazy")
        run_tool(edit, {"path": "big.txt", "oldText": old_fuzzy, "newText": new})

    patches = {a: one_line_patch("big.txt", a, b), b: one_line_patch("big.txt", b, a)}
    (root / "from_a.diff").write_text(patches[a])
    (root / "from_b.diff").write_text(patches[b])

    def ours_patch(i: int) -> None:
        old, _new = flip()
        run_tool(patch, {"patch": patches[old]})

    def git_patch(i: int) -> None:
        old, _new = flip()
        name = "from_a.diff" if old == a else "from_b.diff"
        subprocess.run(["git", "apply", name], cwd=root, check=True)

    rows: list[tuple[str, float, str, float]] = []
    rows.append(("edit (exact match)", timed(ours_edit), "read+str.replace+write", timed(floor_edit)))
    rows.append(("edit (fuzzy pass)", timed(ours_fuzzy), "read+str.replace+write", timed(floor_edit)))
    if shutil.which("git"):
        rows.append(("apply_patch", timed(ours_patch), "git apply", timed(git_patch)))
    print(f"file: {size_mb:.1f} MB, {LINES} lines, change at line {TARGET + 1}; median of {REPS} calls")
    print(f"{'operation':<22} {'ours ms':>9}  {'baseline':<24} {'base ms':>9} {'ratio':>7}")
    for name, ours, base_name, base in rows:
        print(f"{name:<22} {ours:>9.1f}  {base_name:<24} {base:>9.1f} {ours / base:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
