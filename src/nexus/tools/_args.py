"""Argument checks shared by the tools; each failure names the argument and what was expected."""

from __future__ import annotations

from typing import Any

from nexus.tools._workspace import ToolError


def req_str(args: dict[str, Any], name: str, *, allow_empty: bool = True) -> str:
    """A required string argument."""
    if name not in args or args[name] is None:
        raise ToolError(f"Missing required argument {name!r} (a string).")
    value = args[name]
    if not isinstance(value, str):
        raise ToolError(f"Argument {name!r} must be a string, got {type(value).__name__}.")
    if not allow_empty and not value:
        raise ToolError(f"Argument {name!r} must not be empty.")
    return value


def opt_str(args: dict[str, Any], name: str) -> str | None:
    """An optional string argument (``None`` when absent)."""
    if args.get(name) is None:
        return None
    return req_str(args, name)


def opt_int(args: dict[str, Any], name: str, *, minimum: int = 0) -> int | None:
    """An optional integer argument ``>= minimum``; integral floats and digit strings are accepted."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"Argument {name!r} must be an integer, got {value!r}.")
    if value < minimum:
        raise ToolError(f"Argument {name!r} must be >= {minimum}, got {value}.")
    return value


def opt_number(args: dict[str, Any], name: str) -> float | None:
    """An optional positive number (seconds)."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ToolError(f"Argument {name!r} must be a number, got {value!r}.") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolError(f"Argument {name!r} must be a positive number, got {value!r}.")
    return float(value)


def opt_bool(args: dict[str, Any], name: str) -> bool:
    """An optional boolean argument (false when absent)."""
    value = args.get(name)
    if value is None:
        return False
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ToolError(f"Argument {name!r} must be true or false, got {value!r}.")
    return value
