from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nexus.errors import NexusError
from nexus.tools import Workspace, WorkspaceError, coding_tools

from ._helpers import call


def test_relative_and_absolute_inside(ws: Workspace) -> None:
    assert ws.resolve("a/b.txt") == ws.root / "a" / "b.txt"
    assert ws.resolve(str(ws.root / "x")) == ws.root / "x"
    assert ws.resolve(None) == ws.root
    assert ws.resolve("") == ws.root
    assert ws.resolve("a/../b") == ws.root / "b"


def test_leading_at_and_unicode_spaces(ws: Workspace) -> None:
    assert ws.resolve("@src/x.py") == ws.root / "src" / "x.py"
    assert ws.resolve("my\u00a0file.txt") == ws.root / "my file.txt"


@pytest.mark.parametrize("bad", ["..", "../x", "a/../../x", "/etc/passwd", "~/.bashrc", "@../secret"])
def test_outside_is_refused_naming_path_and_root(ws: Workspace, bad: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        ws.resolve(bad)
    msg = str(info.value)
    assert repr(bad) in msg and str(ws.root) in msg
    assert isinstance(info.value, NexusError) and isinstance(info.value, ValueError)


def test_tilde_inside_workspace_when_home_is_inside(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(ws.root / "home"))
    assert ws.resolve("~/notes.md") == ws.root / "home" / "notes.md"


def test_symlink_out_is_refused_and_inside_allowed(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    os.symlink(secret, ws.root / "link")
    os.symlink(tmp_path, ws.root / "dirlink")
    (ws.root / "real.txt").write_text("r")
    os.symlink(ws.root / "real.txt", ws.root / "ok")
    with pytest.raises(WorkspaceError):
        ws.resolve("link")
    with pytest.raises(WorkspaceError):
        ws.resolve("dirlink/secret.txt")
    assert ws.resolve("ok") == ws.root / "real.txt"


def test_root_must_be_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")


async def test_every_tool_refuses_outside_paths(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    tools = {t.name: t for t in coding_tools(ws)}
    attempts: dict[str, dict[str, Any]] = {
        "read": {"path": str(outside)},
        "write": {"path": "../outside.txt", "content": "pwned"},
        "edit": {"path": "../outside.txt", "oldText": "keep", "newText": "lose"},
        "grep": {"pattern": "keep", "path": ".."},
        "find": {"pattern": "*.txt", "path": ".."},
        "ls": {"path": ".."},
        "apply_patch": {"patch": "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-keep me\n+lost\n"},
    }
    for name, args in attempts.items():
        with pytest.raises(WorkspaceError, match="outside the workspace root"):
            await call(tools[name], **args)
    assert outside.read_text() == "keep me\n"


def test_coding_tools_names_and_subset(ws: Workspace) -> None:
    names = [t.name for t in coding_tools(ws.root)]
    assert names == ["read", "write", "edit", "bash", "grep", "find", "ls", "apply_patch"]
    subset = coding_tools(ws, enabled=["ls", "read"])
    assert [t.name for t in subset] == ["ls", "read"]
    for tool in coding_tools(ws):
        assert tool.parameters["type"] == "object" and tool.description
        assert tool.as_llm_tool().name == tool.name
    with pytest.raises(NexusError, match="Unknown tool"):
        coding_tools(ws, enabled=["read", "rm"])


def test_pi_parameter_names(ws: Workspace) -> None:
    props = {t.name: set(t.parameters["properties"]) for t in coding_tools(ws)}
    assert props["read"] == {"path", "offset", "limit"}
    assert props["write"] == {"path", "content"}
    assert props["edit"] == {"path", "oldText", "newText", "edits"}
    assert props["bash"] == {"command", "timeout"}
    assert props["grep"] == {"pattern", "path", "glob", "ignoreCase", "literal", "context", "limit"}
    assert props["find"] == {"pattern", "path", "limit"}
    assert props["ls"] == {"path", "limit"}
    assert props["apply_patch"] == {"patch"}


def test_nul_in_path_is_a_clear_workspace_error(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="contains a NUL character"):
        ws.resolve("a\x00b.txt")


_FLIPPER = """
import os, sys
name, outside = sys.argv[1], sys.argv[2]
tmp = name + ".flip"
while True:
    os.symlink(outside, tmp)
    os.replace(tmp, name)  # the name now points out of the workspace
    with open(tmp, "w") as fh:
        fh.write("harmless words inside\\n")
    os.replace(tmp, name)  # and is a plain file again
"""


async def test_read_never_shows_a_file_outside_when_its_name_is_swapped_for_a_symlink_meanwhile(
    ws: Workspace, tmp_path: Path
) -> None:
    """Another process (another user of a shared workspace) flips ``a.txt`` between a file and a symlink out.

    The name is resolved, then opened: whatever it is by the time of the open is what is read,
    so the opened file itself must lie inside the workspace.
    """
    import subprocess
    import sys

    from nexus.tools import ToolError, read_tool

    from ._helpers import text_of

    outside = tmp_path / "secret.txt"
    outside.write_text("TOP SECRET outside the workspace\n")
    (ws.root / "a.txt").write_text("harmless words inside\n")
    flipper = subprocess.Popen([sys.executable, "-c", _FLIPPER, str(ws.root / "a.txt"), str(outside)])  # noqa: ASYNC220
    tool, shown, refused = read_tool(ws), 0, 0
    try:
        for _ in range(3000):
            try:
                text = text_of(await call(tool, path="a.txt"))
            except ToolError:
                refused += 1  # seen as a symlink out, or found changed while it was opened
                continue
            assert "TOP SECRET" not in text, "read showed a file outside the workspace"
            shown += 1
    finally:
        flipper.kill()
        flipper.wait()
    assert shown and refused, (shown, refused)  # the race was run both ways
