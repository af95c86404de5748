"""apply_patch against real diffs (CPython 3.12.1 → 3.13.0), compared with what ``git apply`` produces."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nexus.tools import Workspace, apply_patch_tool

from ._helpers import call

FIXTURES = Path(__file__).parent / "fixtures" / "real_diffs"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


SUFFIX = ".fixture"


def tree(root: Path) -> dict[str, bytes]:
    """Files under ``root`` (fixture suffix dropped) -> bytes."""
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix().removesuffix(SUFFIX): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }


def materialise(src: Path, dst: Path) -> None:
    """Copy a fixture tree to ``dst`` under the real file names."""
    dst.mkdir()
    for name, data in tree(src).items():
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        (dst / name).write_bytes(data)


def test_fixture_set_is_complete() -> None:
    assert {"multi_file", "create", "delete", "offsets", "mixed_create_delete_modify"} <= set(CASES)
    offsets = (FIXTURES / "offsets" / "patch.diff").read_text()
    assert offsets.count("\n@@ ") >= 5


@pytest.mark.parametrize("case", CASES)
async def test_matches_recorded_post_image(case: str, tmp_path: Path) -> None:
    src = FIXTURES / case
    work = tmp_path / "w"
    materialise(src / "pre", work)
    await call(apply_patch_tool(Workspace(work)), patch=(src / "patch.diff").read_text("utf-8"))
    assert tree(work) == tree(src / "post")


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize("case", CASES)
def test_recorded_post_image_is_what_git_apply_gives(case: str, tmp_path: Path) -> None:
    src = FIXTURES / case
    work = tmp_path / "g"
    materialise(src / "pre", work)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "apply", str(src / "patch.diff")], cwd=work, check=True)
    assert tree(work) == tree(src / "post")
