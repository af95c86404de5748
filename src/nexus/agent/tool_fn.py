"""``tool()``: turn a typed Python function into an ``AgentTool``.

The function's signature becomes the JSON schema the model sees (via pydantic), its
docstring the description (parameter descriptions come from a Google-style ``Args:``
section), and pydantic validates and coerces the model's arguments before the call. A
validation failure goes back to the model as a readable error result listing each bad
field, so it can correct itself; it never crashes the run.

Three parameter names are special and never appear in the schema: ``signal``
(the run's ``AbortSignal``), ``on_update`` (call it with an ``AgentToolResult`` or a
string to stream progress) and ``tool_call_id``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import typing
from collections.abc import Callable
from typing import Any, overload

from nexus.agent.tool_types import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.errors import NexusError
from nexus.llm import AbortSignal

_SPECIAL = ("signal", "on_update", "tool_call_id")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolDefinitionError(NexusError, TypeError):
    """A function cannot be made into a tool (``*args``, unresolvable annotations…); the message says why."""


class ToolArgumentsError(NexusError, ValueError):
    """The model's arguments do not fit the tool's parameters; the message lists each bad field."""


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {param: description}) using its ``Args:`` section."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters", "params") and line.strip():
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(line.strip())
            if match and (current is None or indent <= 4):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(description).strip(), params


def _strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def _validation_message(tool_name: str, exc: Any, args: dict[str, Any]) -> str:
    lines = [f'Validation failed for tool "{tool_name}":']
    for err in exc.errors(include_url=False):
        path = ".".join(str(p) for p in err.get("loc", ())) or "root"
        lines.append(f"  - {path}: {err.get('msg', 'invalid')}")
    try:
        received = json.dumps(args, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        received = repr(args)
    return "\n".join(lines) + f"\n\nReceived arguments:\n{received}"


def _to_result(value: Any) -> AgentToolResult:
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult.text(value)
    if value is None:
        return AgentToolResult.text("")
    import pydantic_core

    return AgentToolResult.text(pydantic_core.to_json(value).decode())


def _build(
    fn: Callable[..., Any], name: str | None, description: str | None, label: str | None, sequential: bool
) -> AgentTool:
    import pydantic

    tool_name = name or fn.__name__
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"Cannot build tool {tool_name!r}: its type hints do not resolve ({exc}).") from exc
    doc_description, doc_params = parse_docstring(fn.__doc__)
    fields: dict[str, Any] = {}
    params: list[tuple[str, str]] = []  # (parameter name, model field name)
    specials: list[str] = []
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"Cannot build tool {tool_name!r}: *{pname} / **{pname} parameters have no schema."
            )
        annotation = hints.get(pname, Any)
        if pname in _SPECIAL or annotation is AbortSignal:
            specials.append(pname)
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        field_name = pname if not (pname.startswith("_") or hasattr(pydantic.BaseModel, pname)) else f"p_{len(params)}"
        fields[field_name] = (
            annotation,
            pydantic.Field(default, alias=pname if field_name != pname else None, description=doc_params.get(pname)),
        )
        params.append((pname, field_name))
    model = pydantic.create_model(f"{tool_name}_arguments", **fields)
    schema = _strip_titles(model.model_json_schema(by_alias=True))

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        try:
            parsed = model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(_validation_message(tool_name, exc, args)) from None
        return {pname: getattr(parsed, field_name) for pname, field_name in params}

    execute = _make_execute(fn, specials)
    return AgentTool(
        name=tool_name,
        description=description or doc_description or tool_name,
        parameters=schema,
        execute=execute,
        label=label or tool_name,
        validate=validate,
        sequential=sequential,
    )


def _make_execute(fn: Callable[..., Any], specials: list[str]) -> Any:
    is_async = inspect.iscoroutinefunction(fn)

    async def execute(
        tool_call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        kwargs = dict(args)
        if specials:
            if not is_async:
                loop = asyncio.get_running_loop()
                thread_update = on_update

                def on_update(partial: AgentToolResult) -> None:  # called from the worker thread
                    loop.call_soon_threadsafe(thread_update, partial)

            for pname in specials:
                if pname == "tool_call_id":
                    kwargs[pname] = tool_call_id
                elif pname == "on_update":
                    kwargs[pname] = _text_update(on_update)
                else:
                    kwargs[pname] = signal
        if is_async:
            return _to_result(await fn(**kwargs))
        return _to_result(await asyncio.to_thread(fn, **kwargs))

    return execute


def _text_update(on_update: ToolUpdateFn) -> Callable[[AgentToolResult | str], None]:
    def update(partial: AgentToolResult | str) -> None:
        on_update(AgentToolResult.text(partial) if isinstance(partial, str) else partial)

    return update


@overload
def tool(fn: Callable[..., Any], /) -> AgentTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, label: str | None = None, sequential: bool = False
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    sequential: bool = False,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Make an ``AgentTool`` from a typed function, as ``@tool`` or ``@tool(name=..., sequential=True)``.

    Sync functions run in a worker thread so they never block the event loop. The return
    value becomes the result: ``str`` → text, ``AgentToolResult`` → as is, ``None`` → empty
    text, anything else → JSON. Raise an exception to report failure to the model.
    """
    if fn is not None:
        return _build(fn, name, description, label, sequential)

    def decorate(f: Callable[..., Any]) -> AgentTool:
        return _build(f, name, description, label, sequential)

    return decorate
