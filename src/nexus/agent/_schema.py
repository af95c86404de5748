"""A small JSON-schema check for tools that bring no ``validate`` of their own (hand-written ``AgentTool``s).

pi validates every call against the tool's schema before anything runs (AJV with type
coercion). Tools made with ``tool()`` get pydantic; for the rest this checks what models
actually get wrong — missing required properties, wrong basic types, values outside an
``enum`` — and coerces the harmless cases the way AJV's ``coerceTypes`` does (``"5"`` for a
number, ``"true"`` for a boolean, a number for a string). Keywords it does not know
(``anyOf``, ``$ref``, ``pattern``…) are not checked: the tool still sees those values.
"""

from __future__ import annotations

import json
from typing import Any

_MISSING = object()


def _coerce(value: Any, kind: str) -> Any:
    """``value`` as JSON type ``kind`` (coerced where AJV would), or ``_MISSING`` when it is not one."""
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    elif kind in ("number", "integer"):
        if isinstance(value, str):
            try:
                value = float(value.strip()) if value.strip() else value
            except ValueError:
                return _MISSING
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _MISSING
        if kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                return _MISSING
            return int(value)
        return int(value) if isinstance(value, float) and value.is_integer() else value
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
    elif kind == "array":
        return value if isinstance(value, list) else _MISSING
    elif kind == "object":
        return value if isinstance(value, dict) else _MISSING
    elif kind == "null":
        return value if value is None else _MISSING
    else:
        return value  # unknown type name: not checked
    return _MISSING


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(schema: Any, value: Any, path: str, problems: list[str]) -> Any:
    """``value`` checked (and coerced) against ``schema``; problems are appended as ``path: what``."""
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        for k in kinds:
            coerced = _coerce(value, k) if isinstance(k, str) else _MISSING
            if coerced is not _MISSING:
                value = coerced
                break
        else:
            problems.append(f"{path or 'arguments'}: must be {' or '.join(map(str, kinds))}, got {_describe(value)}")
            return value
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        problems.append(
            f"{path or 'arguments'}: must be one of {', '.join(_describe(e) for e in enum)}, got {_describe(value)}"
        )
    if isinstance(value, dict):
        value = _check_object(schema, value, path, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [_check(schema["items"], item, f"{path}[{i}]", problems) for i, item in enumerate(value)]
    return value


def _check_object(schema: dict[str, Any], value: dict[str, Any], path: str, problems: list[str]) -> dict[str, Any]:
    prefix = f"{path}." if path else ""
    required = schema.get("required")
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name in required if isinstance(required, list) else ():
        if name not in value or (value[name] is None and not _allows_null(properties.get(name))):
            problems.append(f"{prefix}{name}: required property is missing")
    out = dict(value)
    for name, sub in properties.items():
        # null for an optional property means "not given" (models send it; the tools read it so)
        if name in out and out[name] is not None:
            out[name] = _check(sub, out[name], f"{prefix}{name}", problems)
    return out


def _allows_null(schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def check_arguments(tool_name: str, schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` coerced to ``schema``; raises ``ValueError`` listing every problem and the arguments received."""
    problems: list[str] = []
    checked = _check(schema, args, "", problems)
    if not problems:
        return checked if isinstance(checked, dict) else args
    try:
        received = json.dumps(args, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        received = repr(args)
    lines = "\n".join(f"  - {p}" for p in problems)
    raise ValueError(
        f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{received}\n\n'
        "Call the tool again with arguments that match its parameters schema."
    )
