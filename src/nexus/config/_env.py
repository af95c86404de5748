"""``${VAR}`` substitution in config values, done when a value is used rather than at load time.

Resolving late means a config with five auth profiles still loads when only two of
their variables are set; the error comes only if a profile whose variable is unset is
actually needed, and it names that variable and where it was written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nexus.errors import ConfigError

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_references(value: str) -> list[str]:
    """The variable names a value refers to with ``${VAR}``, in order."""
    return _REFERENCE.findall(value)


def missing_env(value: str, env: Mapping[str, str]) -> list[str]:
    """The referenced variables that are unset or empty in ``env``."""
    return [name for name in env_references(value) if not env.get(name)]


def resolve_env(value: str, env: Mapping[str, str], where: str = "config value") -> str:
    """``value`` with every ``${VAR}`` replaced; ConfigError naming the variable if one is unset.

    ``$${VAR}`` is not special: write the literal text in another way if you ever need it.
    """
    missing = missing_env(value, env)
    if missing:
        names = ", ".join(missing)
        raise ConfigError(
            f"{where} uses ${{{missing[0]}}} but {names} {'is' if len(missing) == 1 else 'are'} not set: "
            f"export {missing[0]}=… before starting nexus, or change {where} in nexus.toml"
        )
    return _REFERENCE.sub(lambda match: env[match.group(1)], value)
