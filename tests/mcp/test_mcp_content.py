"""How an MCP ``CallToolResult`` reaches the model: every content kind, structured content, errors, limits."""

from __future__ import annotations

import base64

from mcp import types
from nexus.agent.output_limits import MAX_BYTES, MAX_LINES
from nexus.llm.types import ImageContent, TextContent
from nexus.mcp._content import MAX_IMAGE_BYTES, to_tool_result

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()


def _result(*content: object, structured: object = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured, is_error=error)  # type: ignore[arg-type]


def _texts(result: object) -> list[str]:
    return [b.text for b in result.content if isinstance(b, TextContent)]  # type: ignore[attr-defined]


def test_text_images_resources_links_and_audio_each_become_what_a_model_can_take() -> None:
    mapped = to_tool_result(
        _result(
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///notes/a.md", mime_type="text/markdown", text="# A"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.png", mime_type="image/png", blob=PNG),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///c.zip", mime_type="application/zip", blob="AAAA"),
            ),
            types.ResourceLink(type="resource_link", name="log", uri="file:///var/log/x", description="the log"),
            types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        ),
        "fs",
        "read",
    )
    kinds = [type(block).__name__ for block in mapped.content]
    assert kinds == [
        "TextContent",
        "ImageContent",
        "TextContent",
        "ImageContent",
        "TextContent",
        "TextContent",
        "TextContent",
    ]
    texts = _texts(mapped)
    assert texts[0] == "hello"
    assert texts[1] == "[resource file:///notes/a.md (text/markdown)]\n# A"
    assert texts[2].startswith("[binary resource file:///c.zip (application/zip, 3B) not shown")
    assert texts[3] == "[resource link log <file:///var/log/x>: the log]"
    assert texts[4].startswith("[audio (audio/wav")
    assert not mapped.is_error
    assert mapped.details == {"mcp_server": "fs", "mcp_tool": "read"}


def test_is_error_makes_an_error_result_the_model_reads() -> None:
    mapped = to_tool_result(_result(types.TextContent(type="text", text="no such repo"), error=True), "gh", "get")
    assert mapped.is_error and _texts(mapped) == ["no such repo"]


def test_structured_content_is_text_for_the_model_only_when_nothing_else_says_it() -> None:
    only = to_tool_result(_result(structured={"temp": 21}), "w", "now")
    assert _texts(only) == ['{"temp": 21}'] and only.details["structured_content"] == {"temp": 21}  # type: ignore[index]
    both = to_tool_result(
        _result(types.TextContent(type="text", text="21 degrees"), structured={"temp": 21}), "w", "now"
    )
    assert _texts(both) == ["21 degrees"] and both.details["structured_content"] == {"temp": 21}  # type: ignore[index]


def test_an_empty_result_says_so() -> None:
    assert _texts(to_tool_result(_result(), "s", "t")) == ["(the tool returned no content)"]


def test_long_text_is_cut_like_the_coding_tools_and_the_cut_is_announced() -> None:
    lines = "\n".join(f"line {n}" for n in range(1, 5001))
    mapped = to_tool_result(_result(types.TextContent(type="text", text=lines)), "s", "t")
    texts = _texts(mapped)
    assert texts[0].count("\n") + 1 == MAX_LINES
    assert texts[-1].startswith(f"[Output truncated: showing {MAX_LINES} of 5000 lines")
    assert mapped.details["truncated"] is True  # type: ignore[index]
    one_line = to_tool_result(_result(types.TextContent(type="text", text="x" * (3 * MAX_BYTES))), "s", "t")
    assert len(_texts(one_line)[0]) == MAX_BYTES and "Output truncated" in _texts(one_line)[-1]


def test_text_after_the_limit_is_dropped_but_images_stay() -> None:
    big = types.TextContent(type="text", text="y" * MAX_BYTES)
    mapped = to_tool_result(
        _result(
            big,
            types.TextContent(type="text", text="later"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        ),
        "s",
        "t",
    )
    assert "later" not in _texts(mapped) and any(isinstance(b, ImageContent) for b in mapped.content)


def test_images_too_big_or_of_other_types_are_named_not_sent() -> None:
    huge = "A" * (MAX_IMAGE_BYTES * 4 // 3 + 8)
    mapped = to_tool_result(
        _result(
            types.ImageContent(type="image", data=huge, mime_type="image/png"),
            types.ImageContent(type="image", data=PNG, mime_type="image/tiff"),
        ),
        "s",
        "t",
    )
    assert not any(isinstance(b, ImageContent) for b in mapped.content)
    assert "over the 5.0MB limit" in _texts(mapped)[0] and "not PNG, JPEG, GIF or WebP" in _texts(mapped)[1]


def test_tool_names_that_clash_once_cleaned_are_kept_apart() -> None:
    from nexus.mcp._connection import ServerConnection
    from nexus.mcp._tools import server_tools

    connection = ServerConnection("srv", lambda: None, timeout_s=1, start_timeout_s=1)  # type: ignore[arg-type,return-value]
    schema = {"type": "object"}
    connection.tools = [types.Tool(name=name, input_schema=schema) for name in ("a.b", "a_b", "x y", "A_B")]
    names = [tool.name for tool in server_tools(connection)]
    assert names[0] == "srv__a_b" and names[2] == "srv__x_y"
    assert len({name.lower() for name in names}) == 4 and all(name.startswith("srv__") for name in names)
    assert [tool.metadata["mcp_tool"] for tool in server_tools(connection)] == ["a.b", "a_b", "x y", "A_B"]
    assert names[1].startswith("srv__a_b_") and names[3].startswith("srv__A_B_")  # the same name at every listing
    assert [t.name for t in server_tools(connection, ["a?b"])] == [*names[:2], names[3]]  # globs: the server's names
