"""Things made on first use, so importing a module costs nothing for what a run may never need.

:func:`lazy_attribute`: package faces re-export public names imported from their modules on first
use (``import nexus.<package>`` stays cheap while ``from nexus.<package> import X`` keeps working;
each package's ``__getattr__`` calls it with its own table). :class:`LazyPattern`: a regular
expression compiled on first use (compiling one at import costs 0.1-1 ms, and most are for
paths a run rarely takes).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping

TYPE_CHECKING = False  # not typing's: `nexus --help` imports this module and not typing (mypy reads the name alike)
if TYPE_CHECKING:
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


class LazyPattern:
    """``re.compile(pattern, flags)``, done the first time the pattern is used."""

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern."""
        if self._compiled is None:
            self._compiled = re.compile(self._pattern, self._flags)
        return self._compiled

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled.match(string)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str) -> str:
        return self.compiled.sub(repl, string)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str) -> tuple[str, int]:
        return self.compiled.subn(repl, string)
