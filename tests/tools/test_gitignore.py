"""The pure-Python .gitignore handling agrees with git itself on a tree of tricky patterns."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nexus.tools._walk import GitIgnore, IgnoreChecker, glob_match, walk

ROOT_IGNORE = """
# comment
*.log
!keep.log
build/
/root_only.txt
docs/**/*.tmp
**/cache
a/b
trailing.txt   
\\#hash.txt
"""
SUB_IGNORE = "local.txt\n!*.md\n/anchored.txt\n"
FILES = [
    "x.log",
    "keep.log",
    "src/y.log",
    "src/keep.log",
    "build/out.o",
    "src/build/deep.o",
    "build.txt",
    "root_only.txt",
    "src/root_only.txt",
    "docs/a/b/c.tmp",
    "docs/c.tmp",
    "other/c.tmp",
    "cache/x",
    "src/cache/y",
    "a/b/c.txt",
    "x/a/b",
    "trailing.txt",
    "#hash.txt",
    "sub/local.txt",
    "sub/deeper/local.txt",
    "sub/anchored.txt",
    "sub/deeper/anchored.txt",
    "sub/readme.md",
    "local.txt",
    "anchored.txt",
    "plain.py",
    ".hidden/file",
]


def make_tree(root: Path) -> None:
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    (root / ".gitignore").write_text(ROOT_IGNORE)
    (root / "sub" / ".gitignore").write_text(SUB_IGNORE)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_walk_agrees_with_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    make_tree(root)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.split()
    ours = [p.relative_to(root).as_posix() for p, _ in walk(root, root)]
    assert sorted(ours) == sorted(listed)
    checker = IgnoreChecker(root)
    for name in FILES:
        if name.startswith(".git/"):
            continue
        assert checker.ignored(root / name, False) == (name not in listed), name


def test_gitignore_rules_without_git() -> None:
    spec = GitIgnore(["*.pyc", "!keep.pyc", "out/", "/top"])
    assert spec.match("a/b.pyc", False) and not spec.match("keep.pyc", False)
    assert spec.match("out", True) and not spec.match("out", False)
    assert spec.match("top", False) and not spec.match("a/top", False)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "a/b/c.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("**/*.json", "a.json", True),
        ("*.{ts,tsx}", "x/y.tsx", True),
        ("[ab]*.txt", "b1.txt", True),
        ("[!ab]*.txt", "b1.txt", False),
        ("?.md", "x.md", True),
        ("?.md", "xy.md", False),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected
