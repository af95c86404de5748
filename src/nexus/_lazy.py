"""Lazy re-exports for package faces: a public name is imported from its module on first use.

``import nexus.<package>`` stays cheap (no pydantic, no engine) while ``from nexus.<package> import X``
keeps working; each package's ``__getattr__`` calls :func:`lazy_attribute` with its own table.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def lazy_attribute(package: str, table: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """``name`` from the module ``table[name]`` names (``".x"``: relative to ``package``), imported now
    and cached in the package's ``namespace``."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    namespace[name] = value
    return value
