from __future__ import annotations

from typing import Any

import pytest

from nexus.tools import ToolError, Workspace, edit_tool

from ._helpers import call, text_of


async def edit(ws: Workspace, name: str, data: bytes, **args: Any) -> bytes:
    (ws.root / name).write_bytes(data)
    await call(edit_tool(ws), path=name, **args)
    return (ws.root / name).read_bytes()


async def test_exact_unique_replace_with_diff(ws: Workspace) -> None:
    (ws.root / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = await call(edit_tool(ws), path="m.py", oldText="b = 2", newText="b = 20\nb2 = 21")
    assert (ws.root / "m.py").read_text() == "a = 1\nb = 20\nb2 = 21\nc = 3\n"
    assert result.details is not None
    assert result.details["first_changed_line"] == 2
    diff = result.details["diff"]
    assert diff == "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,4 @@\n a = 1\n-b = 2\n+b = 20\n+b2 = 21\n c = 3\n"
    assert "Successfully replaced" in text_of(result)


async def test_crlf_and_bom_preserved(ws: Workspace) -> None:
    out = await edit(ws, "w.txt", b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n", oldText="two\nthree", newText="2\n3")
    assert out == b"\xef\xbb\xbfone\r\n2\r\n3\r\n"


async def test_mixed_line_endings_untouched_outside_span(ws: Workspace) -> None:
    data = b"a\r\nb\nc\r\nd\n"
    out = await edit(ws, "mix.txt", data, oldText="c", newText="C")
    assert out == b"a\r\nb\nC\r\nd\n"


async def test_fuzzy_changes_only_matched_span(ws: Workspace) -> None:
    original = (
        "title = \u201cHello\u201d   \n"  # smart quotes + trailing spaces on the target line
        "keep = \u2018curly\u2019 \u2014 dash\u00a0nbsp   \n"  # unrelated line with the same oddities
        "x = 1\n"
    )
    out = await edit(ws, "f.py", original.encode(), oldText='title = "Hello"', newText='title = "Bye"')
    expected = original.replace("title = \u201cHello\u201d", 'title = "Bye"')
    assert out.decode() == expected  # everything else byte-identical (pi normalised the whole file)


async def test_fuzzy_multiline_with_trailing_whitespace_and_dashes(ws: Workspace) -> None:
    original = "def f():  \n    return a \u2013 b\t\n\nother\u00a0line  \n"
    out = await edit(
        ws, "g.py", original.encode(), oldText="def f():\n    return a - b", newText="def f():\n    return a + b"
    )
    assert out.decode() == "def f():\n    return a + b\t\n\nother\u00a0line  \n"


async def test_fuzzy_nfkc(ws: Workspace) -> None:
    original = "x = \ufb01le  # ligature\ny = 2\n"
    out = await edit(ws, "h.py", original.encode(), oldText="x = file", newText="x = path")
    assert out.decode() == "x = path  # ligature\ny = 2\n"


async def test_multi_edit_all_applied(ws: Workspace) -> None:
    out = await edit(
        ws,
        "m.txt",
        b"alpha\nbeta\ngamma\n",
        edits=[{"oldText": "gamma", "newText": "GAMMA"}, {"oldText": "alpha", "newText": "ALPHA"}],
    )
    assert out == b"ALPHA\nbeta\nGAMMA\n"


async def test_multi_edit_all_or_nothing(ws: Workspace) -> None:
    (ws.root / "m.txt").write_bytes(b"alpha\nbeta\n")
    with pytest.raises(ToolError, match=r"edits\[1\]: Could not find"):
        await call(
            edit_tool(ws),
            path="m.txt",
            edits=[{"oldText": "alpha", "newText": "A"}, {"oldText": "zeta", "newText": "Z"}],
        )
    assert (ws.root / "m.txt").read_bytes() == b"alpha\nbeta\n"
    with pytest.raises(ToolError, match="overlap"):
        await call(
            edit_tool(ws),
            path="m.txt",
            edits=[{"oldText": "alpha\nbeta", "newText": "x"}, {"oldText": "beta", "newText": "y"}],
        )
    assert (ws.root / "m.txt").read_bytes() == b"alpha\nbeta\n"


async def test_not_found_has_closest_lines_hint(ws: Workspace) -> None:
    (ws.root / "c.py").write_text("import os\n\ndef compute_total(items):\n    return sum(items)\n")
    with pytest.raises(ToolError) as info:
        await call(edit_tool(ws), path="c.py", oldText="def compute_totals(items):\n    return 0", newText="x")
    msg = str(info.value)
    assert "Could not find the text" in msg and "3: def compute_total(items):" in msg


async def test_duplicates_rejected(ws: Workspace) -> None:
    (ws.root / "d.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"Found 2 occurrences .* must be unique: add more context"):
        await call(edit_tool(ws), path="d.txt", oldText="x = 1", newText="x = 3")
    # duplicates counted fuzzily as well
    (ws.root / "e.txt").write_text("s = \u201ca\u201d\ns = \u201da\u201c\n")
    with pytest.raises(ToolError, match="Found 2 occurrences"):
        await call(edit_tool(ws), path="e.txt", oldText='s = "a"', newText="t")
    assert (ws.root / "d.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


async def test_no_changes_and_bad_args(ws: Workspace) -> None:
    (ws.root / "n.txt").write_text("same\n")
    with pytest.raises(ToolError, match="No changes made"):
        await call(edit_tool(ws), path="n.txt", oldText="same", newText="same")
    with pytest.raises(ToolError, match="oldText must not be empty"):
        await call(edit_tool(ws), path="n.txt", oldText="", newText="x")
    with pytest.raises(ToolError, match="Give oldText and newText"):
        await call(edit_tool(ws), path="n.txt")
    with pytest.raises(ToolError, match=r"edits\[0\]: Missing required argument 'newText'"):
        await call(edit_tool(ws), path="n.txt", edits=[{"oldText": "same"}])
    with pytest.raises(ToolError, match="File not found"):
        await call(edit_tool(ws), path="missing.txt", oldText="a", newText="b")
    (ws.root / "latin.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ToolError, match="not UTF-8"):
        await call(edit_tool(ws), path="latin.txt", oldText="caf", newText="x")
    assert (ws.root / "latin.txt").read_bytes() == b"caf\xe9\n"


async def test_large_file_diff_is_local(ws: Workspace) -> None:
    lines = [f"line {i}\n" for i in range(50_000)]
    (ws.root / "big.txt").write_text("".join(lines))
    result = await call(edit_tool(ws), path="big.txt", oldText="line 49990\n", newText="changed\n")
    assert result.details is not None
    assert result.details["first_changed_line"] == 49991
    assert "@@ -49988,7 +49988,7 @@" in result.details["diff"]
    assert (ws.root / "big.txt").read_text().count("\n") == 50_000
