"""tool(): schema from signature and docstring, validation with coercion, readable errors, sync in a thread."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from nexus.agent import AgentTool, AgentToolResult, ToolArgumentsError, ToolDefinitionError, tool
from nexus.agent.tool_fn import parse_docstring
from nexus.llm.abort import AbortSignal
from nexus.llm.types import TextContent


class Point(BaseModel):
    x: int
    y: int


@tool
async def read_file(
    path: str, offset: int = 1, limit: int | None = None, mode: Literal["text", "bytes"] = "text"
) -> str:
    """Read a file from the workspace.

    Lines are numbered from 1.

    Args:
        path: Path of the file, relative to the workspace.
        offset: First line to read
            (1-based).
        limit: How many lines at most.

    Returns:
        The file content.
    """
    return f"{path}:{offset}:{limit}:{mode}"


def run(t: AgentTool, args: dict[str, Any], call_id: str = "id1") -> AgentToolResult:
    updates: list[AgentToolResult] = []

    async def go() -> AgentToolResult:
        validated = t.validate(args) if t.validate else args
        return await t.execute(call_id, validated, AbortSignal(), updates.append)

    return asyncio.run(go())


def test_schema_and_description_from_signature_and_docstring() -> None:
    assert isinstance(read_file, AgentTool)
    assert read_file.name == "read_file" and read_file.label == "read_file"
    assert read_file.description == "Read a file from the workspace.\n\nLines are numbered from 1."
    schema = read_file.parameters
    assert schema["type"] == "object" and schema["required"] == ["path"]
    props = schema["properties"]
    assert props["path"] == {"type": "string", "description": "Path of the file, relative to the workspace."}
    assert props["offset"]["type"] == "integer" and props["offset"]["default"] == 1
    assert props["offset"]["description"] == "First line to read (1-based)."
    assert props["mode"]["enum"] == ["text", "bytes"]
    assert "title" not in schema and all("title" not in p for p in props.values())
    json.dumps(schema)  # plain JSON


def test_validation_coerces_and_fills_defaults() -> None:
    assert read_file.validate is not None
    assert read_file.validate({"path": "a.txt", "offset": "5"}) == {
        "path": "a.txt",
        "offset": 5,
        "limit": None,
        "mode": "text",
    }
    result = run(read_file, {"path": "a.txt", "limit": "3"})
    assert result.content == [TextContent("a.txt:1:3:text")] and not result.is_error


def test_validation_error_lists_each_bad_field_and_the_arguments() -> None:
    assert read_file.validate is not None
    with pytest.raises(ToolArgumentsError) as info:
        read_file.validate({"offset": "many", "mode": "video"})
    text = str(info.value)
    assert text.startswith('Validation failed for tool "read_file":\n')
    assert "  - path: Field required" in text
    assert "  - offset: Input should be a valid integer" in text
    assert "  - mode: Input should be 'text' or 'bytes'" in text
    assert text.endswith('Received arguments:\n{\n  "offset": "many",\n  "mode": "video"\n}')
    assert isinstance(info.value, ValueError)


def test_decorator_with_options_and_special_parameters() -> None:
    seen: dict[str, Any] = {}

    @tool(name="move", sequential=True, label="Move point")
    async def move_point(point: Point, tool_call_id: str, signal: AbortSignal, on_update: Any) -> Point:
        """Move a point one step right."""
        seen["id"] = tool_call_id
        seen["signal"] = isinstance(signal, AbortSignal)
        on_update("moving")
        return Point(x=point.x + 1, y=point.y)

    assert move_point.name == "move" and move_point.sequential and move_point.label == "Move point"
    assert set(move_point.parameters["properties"]) == {"point"}  # specials are not in the schema
    updates: list[AgentToolResult] = []

    async def go() -> AgentToolResult:
        assert move_point.validate is not None
        args = move_point.validate({"point": {"x": "1", "y": 2}})
        assert isinstance(args["point"], Point)
        return await move_point.execute("call-9", args, AbortSignal(), updates.append)

    result = asyncio.run(go())
    assert seen == {"id": "call-9", "signal": True}
    assert json.loads(result.content[0].text) == {"x": 2, "y": 2}  # type: ignore[union-attr]
    assert updates[0].content == [TextContent("moving")]


def test_sync_tool_runs_in_a_worker_thread_and_can_stream_updates() -> None:
    threads: list[str] = []

    @tool
    def count(n: int, on_update: Any) -> dict[str, int]:
        """Count to n."""
        threads.append(threading.current_thread().name)
        for i in range(n):
            on_update(AgentToolResult.text(str(i)))
        return {"counted": n}

    updates: list[AgentToolResult] = []

    async def go() -> AgentToolResult:
        assert count.validate is not None
        result = await count.execute("c", count.validate({"n": 3}), AbortSignal(), updates.append)
        await asyncio.sleep(0)  # updates are delivered on the loop thread
        return result

    result = asyncio.run(go())
    assert threads and threads[0] != threading.main_thread().name
    assert json.loads(result.content[0].text) == {"counted": 3}  # type: ignore[union-attr]
    assert [u.content[0].text for u in updates] == ["0", "1", "2"]  # type: ignore[union-attr]


def test_return_value_conversion() -> None:
    @tool
    def nothing() -> None:
        """Returns nothing."""

    @tool
    def full() -> AgentToolResult:
        """Returns a full result."""
        return AgentToolResult.text("x", details={"k": 1}, is_error=True)

    assert run(nothing, {}).content == [TextContent("")]
    r = run(full, {})
    assert r.is_error and r.details == {"k": 1}


def test_parameter_names_that_clash_with_pydantic_still_work() -> None:
    @tool
    def fn(schema: str, copy: int = 0) -> str:
        """Names that BaseModel also uses."""
        return f"{schema}-{copy}"

    assert set(fn.parameters["properties"]) == {"schema", "copy"}
    assert run(fn, {"schema": "s", "copy": "2"}).content == [TextContent("s-2")]


def test_bad_tool_definitions_are_refused_clearly() -> None:
    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool
        def varargs(*args: int) -> str:
            """No schema possible."""
            return ""

    with pytest.raises(ToolDefinitionError, match="type hints"):

        @tool
        def unresolved(x: NoSuchType) -> str:  # type: ignore[name-defined]  # noqa: F821
            """Annotation cannot be resolved."""
            return ""


def test_parse_docstring_variants() -> None:
    desc, params = parse_docstring(
        """Summary line.

        Arguments:
            a (int): first
            b: second, which
                continues here
        Raises:
            ValueError: never listed as a parameter
        """
    )
    assert desc == "Summary line."
    assert params == {"a": "first", "b": "second, which continues here"}
    assert parse_docstring(None) == ("", {})
