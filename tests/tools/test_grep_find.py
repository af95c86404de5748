from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from nexus.agent.tool_types import AgentTool
from nexus.tools import ToolError, Workspace, find_tool, grep_tool
from nexus.tools import find as find_mod

from ._helpers import call, text_of

HAVE_RG = shutil.which("rg") is not None
HAVE_FD = shutil.which("fd") is not None or shutil.which("fdfind") is not None
REQUIRED = os.environ.get("NEXUS_REQUIRE_SEARCH_TOOLS") == "1"
"""Set by .ci/run: there, missing ripgrep/fd fail the binary variants instead of skipping them."""


def grep_variants(ws: Workspace) -> list[AgentTool]:
    """The forced pure-Python grep, plus ripgrep when it is installed."""
    return [grep_tool(ws, use_ripgrep=False)] + ([grep_tool(ws)] if HAVE_RG else [])


def find_variants(ws: Workspace) -> list[AgentTool]:
    return [find_tool(ws, use_fd=False)] + ([find_tool(ws)] if HAVE_FD else [])


@pytest.fixture(params=["python", "binary"])
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "binary" and not (HAVE_RG and HAVE_FD):
        if REQUIRED:
            pytest.fail("NEXUS_REQUIRE_SEARCH_TOOLS=1 but ripgrep (rg) or fd (fd/fdfind) is not installed")
        pytest.skip("ripgrep/fd not installed (apt-get install ripgrep fd-find)")
    return str(request.param)


@pytest.fixture
def tree(ws: Workspace) -> Workspace:
    files = {
        "src/app.py": "import os\n\ndef main():\n    print('Hello')\n    return 0\n",
        "src/util.py": "def helper():\n    return 'hello world'\n",
        "src/deep/x.spec.ts": "it('hello')\n",
        "README.md": "# Hello project\nUse main.\n",
        ".hidden/conf.py": "HELLO = 1\n",
        "build/out.py": "hello = 'generated'\n",
        "notes.log": "hello log\n",
        ".git/config": "hello from git\n",
    }
    for name, content in files.items():
        (ws.root / name).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / name).write_text(content)
    (ws.root / ".gitignore").write_text("build/\n*.log\n")
    (ws.root / "src" / "deep" / ".gitignore").write_text("ignored_here.ts\n")
    (ws.root / "src" / "deep" / "ignored_here.ts").write_text("hello\n")
    (ws.root / "blob.bin").write_bytes(b"hello\x00\x01\x02")
    return ws


def pick_grep(ws: Workspace, engine: str) -> AgentTool:
    return grep_tool(ws, use_ripgrep=engine == "binary")


def pick_find(ws: Workspace, engine: str) -> AgentTool:
    return find_tool(ws, use_fd=engine == "binary")


async def test_grep_basic_gitignore_hidden(tree: Workspace, engine: str) -> None:
    text = text_of(await call(pick_grep(tree, engine), pattern="hello"))
    assert text.split("\n") == ["src/deep/x.spec.ts:1: it('hello')", "src/util.py:2:     return 'hello world'"]


async def test_grep_ignore_case_literal_glob_path(tree: Workspace, engine: str) -> None:
    grep = pick_grep(tree, engine)
    text = text_of(await call(grep, pattern="hello", ignoreCase=True, glob="*.py"))
    assert text.split("\n") == [
        ".hidden/conf.py:1: HELLO = 1",
        "src/app.py:4:     print('Hello')",
        "src/util.py:2:     return 'hello world'",
    ]
    assert text_of(await call(grep, pattern="print('", literal=True, path="src")) == "src/app.py:4:     print('Hello')"
    only = text_of(await call(grep, pattern="Hello", path="README.md"))
    assert only == "README.md:1: # Hello project"


async def test_grep_context_lines(tree: Workspace, engine: str) -> None:
    text = text_of(await call(pick_grep(tree, engine), pattern="print", context=1))
    assert text.split("\n") == [
        "src/app.py-3- def main():",
        "src/app.py:4:     print('Hello')",
        "src/app.py-5-     return 0",
    ]


async def test_grep_limit_notice_and_no_match(tree: Workspace, engine: str) -> None:
    grep = pick_grep(tree, engine)
    text = text_of(await call(grep, pattern="e", limit=2))
    assert len(text.split("\n\n")[0].split("\n")) == 2
    assert "[2 matches limit reached. Use limit=4 for more, or refine pattern]" in text
    assert text_of(await call(grep, pattern="zzz_nothing")) == "No matches found"


async def test_grep_long_lines_capped(ws: Workspace, engine: str) -> None:
    (ws.root / "long.txt").write_text("needle " + "x" * 2000 + "\n")
    text = text_of(await call(pick_grep(ws, engine), pattern="needle"))
    first = text.split("\n")[0]
    assert first.endswith("... [truncated]") and len(first) < 600
    assert "Some lines truncated to 500 chars" in text


async def test_grep_errors(tree: Workspace, engine: str) -> None:
    grep = pick_grep(tree, engine)
    with pytest.raises(ToolError):
        await call(grep, pattern="(unclosed")
    with pytest.raises(ToolError, match="Path not found"):
        await call(grep, pattern="x", path="nope")
    with pytest.raises(ToolError, match="'pattern' must not be empty"):
        await call(grep, pattern="")


async def test_find_globs(tree: Workspace, engine: str) -> None:
    find = pick_find(tree, engine)
    assert text_of(await call(find, pattern="*.py")).split("\n") == [".hidden/conf.py", "src/app.py", "src/util.py"]
    assert text_of(await call(find, pattern="src/**/*.ts")) == "src/deep/x.spec.ts"
    assert text_of(await call(find, pattern="*.ts")) == "src/deep/x.spec.ts"  # nested .gitignore honoured
    assert text_of(await call(find, pattern="*.log")) == "No files found matching pattern '*.log'"
    assert text_of(await call(find, pattern="**/*.spec.ts")) == "src/deep/x.spec.ts"
    assert text_of(await call(find, pattern="*.py", path="src")).split("\n") == ["src/app.py", "src/util.py"]
    assert text_of(await call(find, pattern="deep")) == "src/deep/"
    assert text_of(await call(find, pattern="*.rs")) == "No files found matching pattern '*.rs'"


async def test_find_limit(tree: Workspace, engine: str) -> None:
    text = text_of(await call(pick_find(tree, engine), pattern="*", limit=2))
    assert len(text.split("\n\n")[0].split("\n")) == 2
    assert "[2 results limit reached. Use limit=4 for more, or refine pattern]" in text


async def test_find_errors(tree: Workspace, engine: str) -> None:
    with pytest.raises(ToolError, match="Not a directory"):
        await call(pick_find(tree, engine), pattern="*", path="README.md")


async def test_find_under_directory_with_glob_characters(ws: Workspace, engine: str) -> None:
    (ws.root / "we[ir]d" / "sub").mkdir(parents=True)
    (ws.root / "we[ir]d" / "sub" / "a.md").write_text("x")
    text = text_of(await call(pick_find(ws, engine), pattern="sub/*.md", path="we[ir]d"))
    assert text == "we[ir]d/sub/a.md"


async def test_grep_does_not_read_through_symlinks_out_of_the_workspace(ws: Workspace, engine: str) -> None:
    outside = ws.root.parent / "secret.txt"
    outside.write_text("SECRET token\n")
    (ws.root / "a.txt").write_text("token here\n")
    (ws.root / "link.txt").symlink_to(outside)
    (ws.root / "linkdir").symlink_to(ws.root.parent, target_is_directory=True)
    os.mkfifo(ws.root / "pipe")  # must be skipped, not read (that would block forever)
    text = text_of(await asyncio.wait_for(call(pick_grep(ws, engine), pattern="token"), 10))
    assert text == "a.txt:1: token here"  # like ripgrep without --follow: symlinks are not searched
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(pick_grep(ws, engine), pattern="token", path="link.txt")


async def test_grep_leaves_out_a_hard_linked_file_as_read_refuses_it(ws: Workspace, engine: str) -> None:
    """A hard link inside the workspace may be a file outside it: its lines are not shown, the file is named."""
    outside = ws.root.parent / "secret.txt"
    outside.write_text("SECRET token\n")
    (ws.root / "a.txt").write_text("token here\n")
    os.link(outside, ws.root / "linked.txt")
    assert text_of(await call(pick_grep(ws, engine), pattern="token")) == (
        "a.txt:1: token here\n\n"
        "[Skipped 1 file with several hard links (maybe a file outside the workspace): linked.txt]"
    )
    assert text_of(await call(pick_grep(ws, engine), pattern="SECRET")) == (
        "No matches found\n\n[Skipped 1 file with several hard links (maybe a file outside the workspace): linked.txt]"
    )
    with pytest.raises(ToolError, match=r"linked\.txt has 2 hard links.*grep refuses to search it"):
        await call(pick_grep(ws, engine), pattern="token", path="linked.txt")


@pytest.mark.skipif(not HAVE_RG and not REQUIRED, reason="ripgrep not installed (apt-get install ripgrep)")
async def test_env_switch_forces_the_pure_python_search(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws.root / "a.txt").write_text("foobar\nfoobaz\n")
    lookahead = "foo(?=bar)"  # Python's re has look-ahead, ripgrep's default engine refuses it
    with pytest.raises(ToolError, match=r"(?s)grep failed: .*look-around"):
        await call(grep_tool(ws), pattern=lookahead)
    monkeypatch.setenv("NEXUS_PURE_PYTHON_SEARCH", "1")
    assert text_of(await call(grep_tool(ws), pattern=lookahead)) == "a.txt:1: foobar"


@pytest.mark.skipif(not HAVE_FD and not REQUIRED, reason="fd not installed (apt-get install fd-find)")
async def test_env_switch_forces_the_pure_python_find(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    real = find_mod.find_binary

    def spy(*names: str) -> str | None:
        calls.append(names)
        return real(*names)

    monkeypatch.setattr(find_mod, "find_binary", spy)
    (ws.root / "x.py").write_text("")
    assert text_of(await call(find_tool(ws), pattern="*.py")) == "x.py"
    assert calls == [("fd", "fdfind")]
    monkeypatch.setenv("NEXUS_PURE_PYTHON_SEARCH", "1")
    assert text_of(await call(find_tool(ws), pattern="*.py")) == "x.py"
    assert calls == [("fd", "fdfind")], "fd was looked up although the pure-Python walk was forced"
