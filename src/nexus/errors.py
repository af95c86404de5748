"""The root of every exception a Nexus user can catch.

Every layer raises subclasses of :class:`NexusError` for conditions a user can hit
(bad input, unknown names, refused operations), so applications can catch one type.
Provider failures are *not* raised: they arrive as assistant messages with
``stop_reason="error"`` (see ``nexus.llm``).
"""

from __future__ import annotations


class NexusError(Exception):
    """Base class of all errors raised by Nexus on purpose."""


class ConfigError(NexusError):
    """The configuration (file, flags or environment) is invalid; the message names what."""


class UnknownProviderError(NexusError, LookupError):
    """A provider or wire API name that is not registered; the message lists the known ones."""


class UsageError(ConfigError):
    """A command's own arguments are wrong (an empty message, an unknown agent named on the command line,
    a flag's value out of range). Exit 2 like a configuration problem, but the CLI does not call it one:
    ``nexus: error: …``, not ``nexus: config error: …``."""
