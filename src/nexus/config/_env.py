"""``${VAR}`` and ``${VAR:-default}`` substitution in config values, done when a value is used.

Resolving late means a command that never calls a provider (``nexus sessions list``)
does not need that provider's variables. But when a provider is used, every variable
its table refers to must be set: a key the user wrote and that silently vanished would
otherwise be replaced by whatever the environment offers (``OPENAI_API_KEY``), which is
a credential the user did not configure for it. ``${VAR:-default}`` is the way to say
"this may be unset": the default (possibly empty) is used instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from nexus._lazy import LazyPattern
from nexus.errors import ConfigError

_REFERENCE = LazyPattern(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def env_references(value: str) -> list[str]:
    """The variable names a value refers to with ``${VAR}`` or ``${VAR:-default}``, in order."""
    return [match.group(1) for match in _REFERENCE.finditer(value)]


def missing_env(value: str, env: Mapping[str, str]) -> list[str]:
    """The referenced variables that are unset or empty in ``env`` and have no ``:-`` default."""
    return [
        match.group(1) for match in _REFERENCE.finditer(value) if match.group(2) is None and not env.get(match.group(1))
    ]


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    value = env.get(match.group(1))
    if value:
        return value
    default = match.group(2)
    return default if default is not None else ""


def resolve_env(
    value: str, env: Mapping[str, str], where: str = "config value", location: str | Callable[[], str] | None = None
) -> str:
    """``value`` with every reference replaced; ConfigError naming the variable if one is unset.

    ``${VAR:-default}`` uses ``default`` when ``VAR`` is unset or empty (as in a POSIX
    shell). ``location`` (``file:line``, or a function giving it) starts the error message when given;
    a function is called only for the error: finding a key's line scans the whole file, which a value
    that resolves does not need.
    ``$${VAR}`` is not special: write the literal text in another way if you ever need it.
    """
    if "${" not in value:  # most values (a URL, a literal key): the pattern is not even compiled
        return value
    missing = missing_env(value, env)
    if missing:
        names = ", ".join(missing)
        first = missing[0]
        if all(name in env for name in missing):  # exported, but as "": saying "not set" sent users looking
            verb = "is set but empty" if len(missing) == 1 else "are set but empty"
        else:
            verb = "is not set" if len(missing) == 1 else "are not set"
        if callable(location):
            location = location()
        prefix = f"{location}: " if location else ""
        raise ConfigError(
            f"{prefix}{where} uses ${{{first}}} but {names} {verb}: export {first}=… before "
            f"starting nexus, or write ${{{first}:-default}} in nexus.toml to give a default"
        )
    return _REFERENCE.sub(lambda match: _substitute(match, env), value)
